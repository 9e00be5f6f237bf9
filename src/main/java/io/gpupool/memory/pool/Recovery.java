package io.gpupool.memory.pool;

import io.gpupool.memory.OutOfDeviceMemoryException;
import io.gpupool.memory.PoolConfig;
import io.gpupool.memory.metric.PoolMetrics;

import java.util.Locale;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.Supplier;

import static io.gpupool.memory.pool.Reservation.format;

/**
 * Staged recovery, trim and the release of empty chunks: how memory the pool holds but nobody uses
 * goes back to the source.
 *
 * <pre>
 *   stage                                   what it frees                           when
 *   1. flush every local cache              runs and objects stranded in streams   every stage below, trim,
 *   2. release empty slabs                  slab runs back to the buddy level       growth that reuses caches
 *   3. coalesce all orders                  buddies merged into larger blocks
 *   4. return empty chunks and cached       chunks back to the source (their        recovery, trim
 *      dedicated chunks                     fences awaited on the host first)
 *   5. return free memory of the policy     MAPPED: unmap all free mapped memory,   recovery, trim
 *                                           release kept physical memory
 * </pre>
 * After a refusal (the source, the cap or a map) {@link #recoverAndRetry} runs stages 1-5 under the
 * grow lock and retries once; a second refusal counts as a failure and becomes the out-of-memory
 * exception, which names what the recovery freed. Periodic maintenance releases only chunks empty for
 * longer than {@code releaseIdleAge} while reserved bytes stay at or above {@code releaseThresholdBytes}.
 * Grow lock held throughout; the streams' owner words are claimed one at a time to flush them.
 */
final class Recovery implements Growth.Fallback {

    private final StreamLevel streams;
    private final GlobalLevel global;
    private final DedicatedChunks dedicated;
    private final Growth growth;
    private final Reservation reservation;
    private final PoolStatistics stats;
    private final PoolMetrics metrics;
    private final Supplier<PoolConfig> config;
    private final ReentrantLock growLock;

    Recovery(StreamLevel streams, GlobalLevel global, DedicatedChunks dedicated, Growth growth, Reservation reservation,
             PoolStatistics stats, PoolMetrics metrics, Supplier<PoolConfig> config, ReentrantLock growLock) {
        this.streams = streams;
        this.global = global;
        this.dedicated = dedicated;
        this.growth = growth;
        this.reservation = reservation;
        this.stats = stats;
        this.metrics = metrics;
        this.config = config;
        this.growLock = growLock;
    }

    /** Stages 1-3; grow lock held. */
    @Override
    public void flushAndCoalesce() {
        int flushed = streams.flushAll();
        stats.trims.add(flushed);
        global.releaseEmptySlabs();
        global.buddy.coalesceAll();
    }

    /** Stages 1-5; grow lock held. @return bytes returned to the source */
    @Override
    public long recoverAll() {
        flushAndCoalesce();
        long released = releaseEmptyChunks(true) + dedicated.release(Long.MAX_VALUE);
        return released + growth.returnFreeMemory();
    }

    @Override
    public <T> T recoverAndRetry(long requested, Supplier<T> retry) {
        growLock.lock();
        try {
            stats.recoveries.increment();
            long recovered = recoverAll();
            try {
                return retry.get();
            } catch (OutOfDeviceMemoryException again) {
                stats.failures.increment();
                throw outOfMemory(requested, recovered, again);
            }
        } finally {
            growLock.unlock();
        }
    }

    /** Returns every empty buddy chunk smaller than {@code bytes} at once (ON_DEMAND, before growing). */
    @Override
    public long releaseEmptyChunksBelow(long bytes) {
        long released = 0;
        for (Chunk chunk : global.chunks.all()) {
            if (!chunk.dedicated && chunk.bytes < bytes && chunk.liveUnits.get() == 0 && global.buddy.detachIfEmpty(chunk)) {
                released += growth.releaseChunk(chunk);
            }
        }
        return released;
    }

    /**
     * Returns empty buddy chunks: all of them with {@code force}, else those empty for longer than
     * releaseIdleAge while reserved bytes stay at or above releaseThresholdBytes. Grow lock held.
     */
    long releaseEmptyChunks(boolean force) {
        long released = 0;
        long now = System.nanoTime();
        PoolConfig cfg = config.get();
        for (Chunk chunk : global.chunks.all()) {
            if (chunk.dedicated || chunk.liveUnits.get() != 0) {
                continue;
            }
            long emptySince = chunk.emptySinceNanos;
            if (emptySince == Chunk.EMPTY_UNSTAMPED) {
                chunk.emptySinceNanos = emptySince = now;          // emptied since the last look
            }
            if (!force && (now - emptySince < cfg.releaseIdleAge().toNanos()
                    || reservation.reserved() - chunk.bytes < cfg.releaseThresholdBytes())) {
                continue;
            }
            if (global.buddy.detachIfEmpty(chunk)) {
                released += growth.releaseChunk(chunk);
            }
        }
        return released;
    }

    @Override
    public OutOfDeviceMemoryException outOfMemory(long requested, long recovered, OutOfDeviceMemoryException cause) {
        long largest = metrics.largestFreeBlockBytes();
        String message = String.format(Locale.ROOT,
                "Out of device memory on %s: tried to allocate %s. Reserved %s of a cap of %s (device capacity %s); "
                        + "allocated %s (requested %s); cached in local caches %s; free in the global pool %s, "
                        + "largest free block %s, fragmentation %.2f. Recovery (flush local caches, coalesce, "
                        + "release empty chunks) returned %s to the device. %s",
                reservation.source().name(), format(requested), format(reservation.reserved()),
                format(reservation.capBytes()), format(reservation.source().capacityBytes()),
                format(metrics.allocatedBytes()), format(metrics.requestedBytes()),
                format(metrics.cachedBytes()), format(metrics.globalFreeBytes()), format(largest),
                metrics.fragmentation(), format(recovered),
                cause == null ? "" : "Last refusal: " + cause.getMessage());
        return new OutOfDeviceMemoryException(requested, message, cause);
    }
}
