package io.gpupool.memory.pool;

import io.gpupool.memory.AllocationStream;
import io.gpupool.memory.OutOfDeviceMemoryException;
import io.gpupool.memory.PoolConfig;

import java.util.concurrent.locks.ReentrantLock;
import java.util.function.Supplier;

/**
 * How the global level obtains memory: a strategy chosen once, when the pool is built. The placement
 * asks it for the few things that differ between policies, so no allocation branches on the policy.
 *
 * <pre>
 *   Placement.allocateRun(units)
 *     place(units, stream)        the policy's preferred free block       ChunkGrowth: one B need not wait for
 *                                                                          MappedGrowth: mapped ones first
 *     ... buddy, coalesce ...
 *     growAndAllocate(units)      the miss path below, under the grow lock
 *     afterTake(handle)           make the run usable                      MappedGrowth: map what is not mapped
 *
 *   allocateLarge(bytes)          above the maximum block                  ChunkGrowth: dedicated chunk (ON_DEMAND:
 *                                                                          a span of free max blocks first)
 *                                                                          MappedGrowth: a span in address space
 * </pre>
 *
 * <h2>The miss path (grow lock held)</h2>
 * <ol>
 *   <li>retry: another thread may have grown;</li>
 *   <li>if {@link #flushesBeforeGrowing} says so, flush every local cache and coalesce, retry;</li>
 *   <li>give idle dedicated chunks back, then {@link #makeRoomBeforeGrowing};</li>
 *   <li>{@link #growOnMiss}, retry;</li>
 *   <li>staged recovery ({@link Fallback#recoverAll}): flush caches, release empty slabs, coalesce,
 *       return empty chunks and free mapped memory, retry;</li>
 *   <li>grow by exactly one block of the request's order (three attempts: other streams allocate
 *       without the grow lock and may take the new chunk first); then fail with the out-of-memory
 *       exception naming what the recovery freed.</li>
 * </ol>
 * The source is called under the grow lock but outside every order lock. Nobody holding a local
 * cache's owner word takes the grow lock.
 */
abstract class Growth {

    /** The staged recovery, as far as growth needs it (the recovery is built over this strategy). */
    interface Fallback {
        /** Flushes every local cache, releases empty slabs and coalesces; returns nothing to the source. */
        void flushAndCoalesce();

        /** Steps 1-5 of the staged recovery; grow lock held. @return bytes returned to the source */
        long recoverAll();

        /** Returns every empty buddy chunk smaller than {@code bytes}; grow lock held. */
        long releaseEmptyChunksBelow(long bytes);

        /** After a refusal: the staged recovery, then {@code retry} once; a second refusal becomes the exception. */
        <T> T recoverAndRetry(long requested, Supplier<T> retry);

        OutOfDeviceMemoryException outOfMemory(long requested, long recovered, OutOfDeviceMemoryException cause);
    }

    /** The global level's run allocation, for a policy that serves large requests as runs. */
    @FunctionalInterface
    interface RunAllocator {
        long allocateRun(int units, AllocationStream stream, long requested);
    }

    final GlobalLevel global;
    final Reservation reservation;
    final PoolStatistics stats;
    final StreamLevel streams;
    final DedicatedChunks dedicated;
    final Supplier<PoolConfig> config;
    final ReentrantLock growLock;
    private Fallback fallback;

    Growth(GlobalLevel global, Reservation reservation, PoolStatistics stats, StreamLevel streams,
           DedicatedChunks dedicated, Supplier<PoolConfig> config, ReentrantLock growLock) {
        this.global = global;
        this.reservation = reservation;
        this.stats = stats;
        this.streams = streams;
        this.dedicated = dedicated;
        this.config = config;
        this.growLock = growLock;
    }

    /** Connects the staged recovery (built after this strategy, over it); called once while the pool is built. */
    void bind(Fallback recovery) {
        this.fallback = recovery;
    }

    Fallback fallback() {
        return fallback;
    }

    // ------------------------------------------------------------------ hooks of the placement

    /** The policy's preferred free run for {@code stream}, or -1 (the placement goes on). */
    abstract long place(int units, AllocationStream stream);

    /** Makes a run the caller just took usable; on failure the caller gives the run back. */
    void afterTake(long handle, long requested) {
    }

    /** A request above the maximum block: a span or a dedicated chunk; returns its handle. */
    abstract long allocateLarge(long bytes, AllocationStream stream, RunAllocator runs);

    // ------------------------------------------------------------------ hooks of the miss path

    /** Step 2: whether to flush the local caches before growing by {@code bytes}. */
    abstract boolean flushesBeforeGrowing(long bytes);

    /** Step 3: after idle dedicated chunks went back. */
    void makeRoomBeforeGrowing(long blockBytes) {
    }

    /** Step 4: grows for a miss of {@code units}; returns the refusal, or null when it grew. */
    abstract OutOfDeviceMemoryException growOnMiss(int units, long blockBytes);

    /** Step 6: whether the pool may grow by exactly the request after the recovery. */
    boolean growsExactly() {
        return true;
    }

    /** Obtains one buddy chunk of {@code bytes} (a multiple of minBlock) within the cap; grow lock held. */
    abstract void grow(long bytes, boolean large);

    // ------------------------------------------------------------------ hooks of recovery and housekeeping

    /** Returns a detached, empty buddy chunk to the source. @return bytes of memory given back */
    long releaseChunk(Chunk chunk) {
        long released = global.releaseMemoryChunk(chunk);
        stats.trims.increment();
        return released;
    }

    /** Step 5 of the staged recovery beyond empty chunks (MAPPED: unmap all free mapped memory). */
    long returnFreeMemory() {
        return 0;
    }

    /** Periodic housekeeping of the policy; grow lock held. @return bytes returned */
    long maintain(long now, PoolConfig cfg) {
        return 0;
    }

    /** What {@code reserve(bytes)} compares with: bytes of buddy space the pool holds. */
    long sizedBytes() {
        return reservation.reserved();
    }

    long addressSpaceBytes() {
        return 0;
    }

    /** Free bytes of the global level that cost memory. */
    long globalFreeBytes() {
        long total = 0;
        for (int k = 0; k <= global.buddy.topOrder(); k++) {
            total += (long) global.buddy.freeBlocks(k) * (global.minBlock << k);
        }
        return total;
    }

    /** A tuning may have lowered the cap: memory the policy keeps beyond it goes. */
    void afterCapChange() {
    }

    /** The pool closed and every chunk went back: what the policy still keeps goes too; grow lock held. */
    void afterClose() {
    }

    /** Physical memory the policy unmapped but keeps to map again (MAPPED), for the metrics. */
    long retainedHandleBytes() {
        return 0;
    }

    long retainedHandles() {
        return 0;
    }

    /** Physical allocations created and released (MAPPED: one per extent or granule mapped, or kept one let go). */
    long physicalCreates() {
        return 0;
    }

    long physicalReleases() {
        return 0;
    }

    /** A tuning changed the growth step; grow lock held. */
    void restartSteps(long growthStepBytes) {
    }

    // ------------------------------------------------------------------ the miss path

    /** Steps 1-6 of the miss path for a run (or span) of {@code units}. */
    final long growAndAllocate(int units) {
        long bytes = (long) units << global.unitShift;
        long blockBytes = units > global.maxUnits                 // a span: whole maximum blocks of one chunk
                ? (long) ((units + global.maxUnits - 1) / global.maxUnits) * global.maxBlock
                : global.minBlock << BuddyLevel.ceilLog2(units);   // a chunk must hold one block of the run's order
        growLock.lock();
        try {
            long handle = global.tryAllocate(units);               // step 1: someone else may have grown
            if (handle >= 0) {
                return handle;
            }
            if (flushesBeforeGrowing(bytes)) {                    // step 2: reuse what the caches hold
                fallback.flushAndCoalesce();
                handle = global.tryAllocate(units);
                if (handle >= 0) {
                    return handle;
                }
            }
            dedicated.release(bytes);                             // step 3: idle dedicated chunks go first
            makeRoomBeforeGrowing(blockBytes);
            OutOfDeviceMemoryException refusal = growOnMiss(units, blockBytes);   // step 4
            handle = global.tryAllocate(units);
            if (handle >= 0) {
                return handle;
            }
            stats.recoveries.increment();                         // step 5: staged recovery
            long recovered = fallback.recoverAll();
            handle = global.tryAllocate(units);
            if (handle >= 0) {
                return handle;
            }
            for (int attempt = 0; attempt < 3 && growsExactly(); attempt++) {     // step 6
                try {
                    growFor(units, blockBytes);
                } catch (OutOfDeviceMemoryException e) {
                    refusal = e;
                    break;
                }
                handle = global.tryAllocate(units);
                if (handle >= 0) {
                    return handle;
                }
            }
            stats.failures.increment();
            throw fallback.outOfMemory(bytes, recovered, refusal);
        } finally {
            growLock.unlock();
        }
    }

    /** Grows a chunk that serves runs of {@code units} (MAPPED keeps large and small runs apart). */
    final void growFor(int units, long bytes) {
        int largeUnits = global.buddy.largeUnits;
        grow(bytes, units >= largeUnits && largeUnits > 0);
    }

    // ------------------------------------------------------------------ dedicated chunks

    /**
     * A request above what the buddy level serves: reuse a freed dedicated chunk of at most 1/8 more,
     * else make room ({@link #makeRoomForDedicated}) and ask the source for a chunk of exactly the
     * rounded request.
     */
    final long allocateDedicated(long bytes, AllocationStream stream) {
        long size = global.roundUp(bytes);
        Chunk chunk = dedicated.take(size);
        if (chunk != null) {
            global.waitForDedicated(chunk, stream);
            stats.countGlobalHit(stream.ordinal());
            return Handles.dedicated(chunk.id);
        }
        makeRoomForDedicated(size);
        long address;
        try {
            address = reservation.allocateChunk(size);
        } catch (OutOfDeviceMemoryException first) {
            address = fallback.recoverAndRetry(bytes, () -> reservation.allocateChunk(size));
        }
        long base = address;
        chunk = global.chunks.add(id -> new Chunk(id, base, size, size >>> global.unitShift, true));
        stats.grows.increment();
        return Handles.dedicated(chunk.id);
    }

    /** Before a new dedicated chunk: cached ones go back until the request is covered. */
    void makeRoomForDedicated(long size) {
        dedicated.release(size);
    }
}
