package io.gpupool.memory.pool;

import io.gpupool.memory.AllocationStream;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;

/**
 * The cache of freed dedicated chunks: chunks of their own for requests the buddy level cannot
 * serve (above the maximum block, or above the largest span a handle describes).
 *
 * <pre>
 *   free(block)  -&gt;  fence recorded on the freeing stream  -&gt;  addLast   | oldest ... newest |  (at most
 *   take(size)   &lt;-  the smallest cached chunk with size &lt;= bytes &lt;= size + size/8             {@value #ENTRIES})
 *   release(n)   -&gt;  oldest first, back to the source after their fences completed
 * </pre>
 * A request that finds no chunk within 1/8 first gives cached chunks back until its own size is
 * covered ({@link #release}), so the cache never raises the peak. Guarded by the deque's monitor;
 * chunks go back to the source outside it.
 */
final class DedicatedChunks {

    /** Freed dedicated chunks kept for reuse at most. */
    static final int ENTRIES = 32;

    private final ArrayDeque<Chunk> free = new ArrayDeque<>();
    private final GlobalLevel global;
    private final Reservation reservation;
    private final PoolStatistics stats;

    DedicatedChunks(GlobalLevel global, Reservation reservation, PoolStatistics stats) {
        this.global = global;
        this.reservation = reservation;
        this.stats = stats;
    }

    private void giveBack(Chunk chunk) {
        global.releaseMemoryChunk(chunk);
        stats.trims.increment();
    }

    /** The smallest cached chunk of at least {@code size} and at most 1/8 more, or null. */
    Chunk take(long size) {
        synchronized (free) {
            Chunk best = null;
            for (Chunk chunk : free) {
                if (chunk.bytes >= size && chunk.bytes - size <= size >>> 3
                        && (best == null || chunk.bytes < best.bytes)) {
                    best = chunk;
                }
            }
            if (best != null) {
                free.remove(best);
                best.idleDedicated = false;
            }
            return best;
        }
    }

    /**
     * Caches the chunk of a freed dedicated block under a fence of {@code stream} (none when {@code settled}: the
     * stream finished with it); evicts the oldest beyond the bound.
     */
    void put(Chunk chunk, AllocationStream stream, boolean settled) {
        FenceSet.Shared fence = settled ? null : global.fenceFor(stream, null);
        if (fence != null) {
            chunk.addFence(0, 1, fence);
            fence.release();
        }
        Chunk evicted = null;
        synchronized (free) {
            chunk.emptySinceNanos = System.nanoTime();
            chunk.idleDedicated = true;
            free.addLast(chunk);
            if (free.size() > ENTRIES) {
                evicted = free.removeFirst();
            }
        }
        if (evicted != null) {
            giveBack(evicted);
        }
    }

    /**
     * Returns cached chunks to the source, oldest first, until {@code bytes} were returned
     * (Long.MAX_VALUE: all), skipping those idle for less than {@code minIdleNanos} and stopping
     * short of taking reserved bytes below {@code keepReserved}.
     */
    long release(long bytes, long minIdleNanos, long keepReserved) {
        List<Chunk> victims = new ArrayList<>();
        long total = 0;
        long now = System.nanoTime();
        synchronized (free) {
            for (var it = free.iterator(); it.hasNext() && total < bytes; ) {
                Chunk chunk = it.next();
                if (now - chunk.emptySinceNanos >= minIdleNanos && reservation.reserved() - total - chunk.bytes >= keepReserved) {
                    it.remove();
                    victims.add(chunk);
                    total += chunk.bytes;
                }
            }
        }
        victims.forEach(this::giveBack);
        return total;
    }

    long release(long bytes) {
        return release(bytes, 0, 0);
    }

    /** Forgets every cached chunk (close: they go back with all chunks). */
    void clear() {
        synchronized (free) {
            free.clear();
        }
    }
}
