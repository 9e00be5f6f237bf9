package io.gpupool.memory.pool;

import io.gpupool.memory.AllocationStream;
import io.gpupool.memory.OutOfDeviceMemoryException;
import io.gpupool.memory.PoolConfig;

/**
 * The global path of an allocation: which free memory a miss of the local level gets, and growth
 * when there is none.
 *
 * <pre>
 *   small class c (bytes &lt; minBlock)
 *     1. refill the stream's class with a batch from SmallObjects (prefers a slab without other
 *        streams' pending fences), pop one                                      (hit: return)
 *     2. take one object (GLOBAL_ONLY, or the cache was busy)                   (hit: return)
 *     3. a new slab: a run of slabBlocks(c) units (below), whose fences the slab inherits; retry
 *     4. no room for that run even after the staged recovery (a cap): one object of the smallest
 *        larger class whose slabs have room; none: the out-of-memory exception passes on
 *   run of n units (n &lt;= maxUnits), or a span (n &gt; maxUnits)
 *     1. a run: a block the stream freed itself, still under its own fence      (hit: return)
 *        (OwnFreedFirst); a span: the free span costing the least to use (SpanChoice)
 *     2. the policy's preferred block (Growth.place)                            (hit: return)
 *     3. any free block (BuddyLevel; spans: the lowest adjacent free max blocks) (hit: return)
 *     4. coalesce all orders, retry                                             (hit: return)
 *     5. the miss path (Growth.growAndAllocate: grow, staged recovery, fail)
 *     then: wait for other streams' fences on the run's units; make it usable (Growth.afterTake:
 *     MAPPED maps it); if that fails, the run goes back and the exception passes on
 * </pre>
 * No lock of its own: the buddy orders and small classes lock themselves; the miss path takes the
 * grow lock.
 */
final class Placement implements Growth.RunAllocator {

    private final GlobalLevel global;
    private final Growth growth;
    private final PoolStatistics stats;
    private final OwnFreedFirst ownFreed;
    private final SpanChoice spans;

    Placement(GlobalLevel global, Growth growth, PoolStatistics stats) {
        this.global = global;
        this.growth = growth;
        this.stats = stats;
        this.ownFreed = new OwnFreedFirst(global);
        this.spans = new SpanChoice(global, () -> growth.config.get().waitBeyondBudget());
    }

    /**
     * A block of class {@code c} for {@code stream}, refilling its local cache ({@code cache}, null in
     * GLOBAL_ONLY mode) where the class is small; {@code requested} is for an out-of-memory message.
     * Under a cap a small class may be served from a larger one (step 4): the handle names its class.
     */
    long allocateClass(int c, AllocationStream stream, LocalCache cache, PoolConfig cfg, long requested) {
        if (c >= global.smallCount) {
            return allocateRun(c - global.smallCount + 1, stream, requested, null);
        }
        long[] one = null;
        while (true) {
            long handle;
            if (cache != null && (handle = cache.refillSmall(c, global.classBytes()[c], global.small, cfg)) != 0) {
                stats.countGlobalHit(stream.ordinal());
                return handle;
            }
            if (one == null) {
                one = new long[1];
            }
            if (global.small.take(c, one, 0, 1, stream) == 1) {
                stats.countGlobalHit(stream.ordinal());
                return one[0];
            }
            FenceSet inherited = new FenceSet();                   // the run's fences, for every later taker
            long run;
            try {
                run = allocateRun(global.classes.slabBlocks(c), stream, requested, inherited);
            } catch (OutOfDeviceMemoryException noRoomForSlab) {
                long larger = takeLarger(c, stream, one);          // step 4
                if (larger == 0) {
                    throw noRoomForSlab;
                }
                stats.failures.decrement();                        // the slab's run failed, not the allocation
                stats.countGlobalHit(stream.ordinal());
                return larger;
            }
            global.small.addSlab(c, run, global.address(run), inherited);
        }
    }

    /**
     * One object of the smallest class above {@code c} whose slabs have room, or 0. Only after the
     * staged recovery failed to find room for a new slab of class {@code c} (it flushed the local
     * caches, so their objects are back in their slabs): a larger object wastes at most what a new
     * slab would have, and a failure would cost the request. It goes back to its own class when freed.
     */
    private long takeLarger(int c, AllocationStream stream, long[] one) {
        for (int d = c + 1; d < global.smallCount; d++) {
            if (global.small.take(d, one, 0, 1, stream) == 1) {
                return one[0];
            }
        }
        return 0;
    }

    /** A request above the maximum block, as the growth policy serves it. */
    long allocateLarge(long bytes, AllocationStream stream) {
        return growth.allocateLarge(bytes, stream, this);
    }

    @Override
    public long allocateRun(int units, AllocationStream stream, long requested) {
        return allocateRun(units, stream, requested, null);
    }

    /**
     * A buddy run of {@code units} minimum blocks for {@code stream}, growing or recovering if needed.
     * The stream is made to wait for the fences of the run's units; with {@code keep} they are also
     * moved there.
     */
    long allocateRun(int units, AllocationStream stream, long requested, FenceSet keep) {
        long handle = units <= global.maxUnits ? ownFreed.allocate(units, stream)    // step 1
                : spans.allocate(units, stream);
        if (handle < 0) {
            handle = growth.place(units, stream);                  // step 2
        }
        if (handle < 0) {
            handle = global.tryAllocate(units);                    // step 3
        }
        if (handle < 0) {
            global.buddy.coalesceAll();                            // step 4: deferred merge, then retry
            handle = global.tryAllocate(units);
        }
        if (handle >= 0) {
            stats.countGlobalHit(stream.ordinal());
        } else {
            handle = growth.growAndAllocate(units);                // step 5
        }
        global.waitForRun(handle, stream, keep);
        try {
            growth.afterTake(handle, requested);
        } catch (RuntimeException e) {
            if (keep != null) {
                keep.clear();
            }
            // the run's fences were moved out when the stream was made to wait on them: its own
            // fence now stands for them (a later taker waits for the earlier streams through it)
            global.returnToGlobal(stream, new long[] {handle}, 0, 1, false);
            throw e;
        }
        return handle;
    }
}
