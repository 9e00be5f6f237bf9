package io.gpupool.memory.pool;

import io.gpupool.memory.AllocationStream;
import io.gpupool.memory.GrowthPolicy;
import io.gpupool.memory.OutOfDeviceMemoryException;
import io.gpupool.memory.PoolConfig;

import java.util.concurrent.locks.ReentrantLock;
import java.util.function.Supplier;

/**
 * Growth by chunks of device memory from the source: {@link GrowthPolicy#EAGER}, {@link GrowthPolicy#LAZY},
 * {@link GrowthPolicy#HYBRID} and {@link GrowthPolicy#ON_DEMAND} (also what MAPPED falls back to on a
 * source that cannot map).
 *
 * <pre>
 *   EAGER      |#### initialBytes ####|                           never grows
 *   LAZY       |step|step x 2 |step x 4      |...                 doubling up to maxGrowthStepBytes
 *   HYBRID     |#### initialBytes ####|step|step x 2 |...
 *   ON_DEMAND  |initial|max(block, maxBlock)|max(block, maxBlock)|  one chunk per miss, after the caches
 *                                                                   were flushed and empty chunks too small
 *                                                                   for the request went back
 * </pre>
 * Doubling steps overshoot live bytes by up to the last step by construction; ON_DEMAND keeps the
 * reservation close to live bytes at the price of source calls (docs/benchmarks.md, "Fragmentation").
 * Where the excess of LAZY sits, and how ON_DEMAND answers each part:
 * <ol>
 *   <li>blocks stranded in local caches: every miss flushes all caches before growing, and a stream
 *       caches at most its share of 1/{@value StreamLevel#LOCAL_SHARE_DIVISOR} of the allocated bytes;</li>
 *   <li>free buddy space in chunks that also hold live blocks, partly lazy steps grown far beyond the
 *       miss: growth adds one maxBlock-sized chunk, never a doubling step;</li>
 *   <li>empty buddy chunks kept while a request above maxBlock took a new dedicated chunk: a new
 *       dedicated chunk first replaces empty chunks; spans let a large request use a warm-up chunk.</li>
 * </ol>
 */
final class ChunkGrowth extends Growth {

    private final GrowthPolicy policy;
    private final boolean onDemand;
    /** Next lazy chunk size; guarded by the grow lock. */
    private long nextStep;

    ChunkGrowth(GrowthPolicy policy, GlobalLevel global, Reservation reservation, PoolStatistics stats,
                StreamLevel streams, DedicatedChunks dedicated, Supplier<PoolConfig> config, ReentrantLock growLock) {
        super(global, reservation, stats, streams, dedicated, config, growLock);
        this.policy = policy;
        this.onDemand = policy == GrowthPolicy.ON_DEMAND;
        this.nextStep = config.get().growthStepBytes();
    }

    @Override
    long place(int units, AllocationStream stream) {
        return units <= global.maxUnits ? global.buddy.allocate(units, stream) : -1;   // a block B need not wait for
    }

    @Override
    long allocateLarge(long bytes, AllocationStream stream, RunAllocator runs) {
        if (onDemand && bytes <= global.maxSpanBytes) {
            long span = global.buddy.allocateSpan((int) ((bytes + global.minBlock - 1) >>> global.unitShift), -1);
            if (span >= 0) {                                       // adjacent free maximum blocks of one chunk
                global.waitForRun(span, stream, null);
                stats.countGlobalHit(stream.ordinal());
                return span;
            }
        }
        return allocateDedicated(bytes, stream);
    }

    @Override
    boolean flushesBeforeGrowing(long bytes) {
        return onDemand || streams.sum(LocalCache.CACHED_BYTES) >= bytes;
    }

    @Override
    void makeRoomBeforeGrowing(long blockBytes) {
        if (onDemand) {
            fallback().releaseEmptyChunksBelow(blockBytes);        // too small for this request: give back, then grow
        }
    }

    @Override
    OutOfDeviceMemoryException growOnMiss(int units, long blockBytes) {
        if (policy == GrowthPolicy.EAGER) {
            return new OutOfDeviceMemoryException((long) units << global.unitShift, "growthPolicy EAGER does not grow");
        }
        try {
            if (onDemand) {
                growFor(units, Math.max(blockBytes, global.maxBlock));
            } else {
                growLazily(blockBytes);
            }
            return null;
        } catch (OutOfDeviceMemoryException e) {
            return e;
        }
    }

    @Override
    boolean growsExactly() {
        return policy != GrowthPolicy.EAGER;
    }

    /** Grows by the next lazy step (at least {@code needed}), falling back to {@code needed} alone. */
    private void growLazily(long needed) {
        long cap = reservation.capBytes();
        long step = Math.max(nextStep, needed);
        long room = (cap - reservation.reserved()) / global.minBlock * global.minBlock;
        if (step > room && room >= needed) {
            step = room;
        }
        try {
            grow(step, false);
        } catch (OutOfDeviceMemoryException e) {
            if (step == needed) {
                throw e;
            }
            grow(needed, false);
            return;
        }
        if (step >= nextStep) {
            nextStep = Math.min(nextStep * 2, config.get().maxGrowthStepBytes());
        }
    }

    @Override
    void grow(long bytes, boolean large) {
        long size = Math.min(bytes, Handles.MAX_CHUNK_UNITS << global.unitShift);
        long address = reservation.allocateChunk(size);
        Chunk chunk = global.chunks.add(id -> new Chunk(id, address, size, size >>> global.unitShift, false));
        global.buddy.addChunk(chunk);
        stats.grows.increment();
    }

    /**
     * ON_DEMAND: flush the caches, coalesce, and return every empty buddy chunk and cached dedicated
     * chunk first, so that the new chunk replaces memory nobody uses instead of adding to it.
     */
    @Override
    void makeRoomForDedicated(long size) {
        if (!onDemand) {
            super.makeRoomForDedicated(size);
            return;
        }
        growLock.lock();
        try {
            fallback().flushAndCoalesce();
            fallback().releaseEmptyChunksBelow(Long.MAX_VALUE);
            dedicated.release(size);
        } finally {
            growLock.unlock();
        }
    }

    /** How many stream shares a local cache may hold ({@link StreamLevel#capBytes}): ON_DEMAND one, the others the configured cap. */
    static int localShareFactor(GrowthPolicy policy) {
        return policy == GrowthPolicy.ON_DEMAND ? 1 : 0;
    }

    @Override
    void restartSteps(long growthStepBytes) {
        nextStep = growthStepBytes;
    }
}
