package io.gpupool.memory.pool;

import io.gpupool.memory.AllocationStream;
import io.gpupool.memory.BudgetReclaim;
import io.gpupool.memory.GrowthPolicy;
import io.gpupool.memory.OutOfDeviceMemoryException;
import io.gpupool.memory.PoolConfig;
import io.gpupool.memory.VirtualMemory;
import io.gpupool.memory.metric.Peaks;

import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.Supplier;

/**
 * {@link GrowthPolicy#MAPPED} growth: buddy chunks are reserved address space, device memory is
 * mapped under the runs in use, and free space between live blocks costs nothing unless it is mapped.
 *
 * <h2>One address-space chunk ({@value #ADDRESS_CHUNK_MAX_BLOCKS} maximum blocks; # mapped, . not)</h2>
 * <pre>
 *   |####|####|##..|....|....|....|####|#...|   units (minimum blocks)
 *    live run   ^tail freed,     free block,   free, mapped: counted as slack
 *               still mapped     never mapped
 * </pre>
 * <ol>
 *   <li>Place ({@link #place}): a stream waiting on another's fence serialises the two on the device,
 *       a map costs host time only; so: a fully mapped block the stream need not wait for, the same
 *       after merging, [near the limit: a fenced mapped block], the block with the most mapped units
 *       the stream need not wait for, any block it need not wait for, a fenced mapped block, the
 *       block with the most mapped units ({@link MostMappedChoice}). Near the limit (the cap, or with
 *       {@link PoolConfig#waitBeyondBudget()} the budget) a map would set off a reclaim or the
 *       staged recovery, so the fenced mapped block comes first there.</li>
 *   <li>Map ({@link #afterTake}): walk the chunk's bitmap and map each unmapped stretch of the run
 *       with one source call; a large chunk maps whole extents of {@value #LARGE_EXTENT_BYTES} B
 *       (the driver charges per physical allocation), a small chunk extents of
 *       {@link PoolConfig#mappedExtentBytes()} (a run shares its end extents with its neighbours). The physical memory
 *       comes from {@link RetainedHandles}: what an unmap kept first, then new allocations, for which
 *       it takes the cap.</li>
 *   <li>Before mapping, {@link #makeRoomToMap} checks the budget: the allocated high-water mark plus
 *       {@link PoolConfig#mappedSlack()} of it (at least {@value #SLACK_FLOOR_UNITS} minimum blocks),
 *       against the mapped bytes (reserved minus what is kept unmapped). Beyond it, under
 *       {@link BudgetReclaim#ON_MAP} the allocating thread reclaims down to {@link PoolConfig#reclaimHysteresis()}
 *       of the slack below the budget (default a quarter) before it maps; the physical memory a reclaim lets
 *       go is kept for the maps that follow up to {@link PoolConfig#retainedHandleBytes()}. Under
 *       {@link BudgetReclaim#PERIODIC} the map goes ahead unless it would pass the cap, and
 *       {@link #maintain} unmaps down to the budget, leaving the local caches alone.</li>
 *   <li>Reclaim ({@link #reclaimMapped}, grow lock held) unmaps free blocks with mapped units, taken out of
 *       the lists ({@link ReclaimChoice}: large blocks first, then by {@link PoolConfig#reclaimOrder()}, which
 *       may also leave the large chunks for last):
 *       first those without unfinished fences; where they are not enough, the local caches (the streams'
 *       reserves too) and empty slabs go back to the global level and it takes from those. A reclaim for
 *       the budget stops there (it never waits); trim and recovery then take fenced blocks too, waiting for
 *       their fences on the host.</li>
 *   <li>A refused map (device or cap) runs the staged recovery and retries once; then the run goes
 *       back and the caller gets the out-of-memory exception.</li>
 * </ol>
 * Runs of at least {@value #LARGE_RUN_BYTES} B live in chunks of their own ({@link Chunk#large}), so
 * small runs do not split the mapped free blocks a large tensor left behind. A stream's local cache
 * holds at most {@value #LOCAL_SHARE_FACTOR} times the ON_DEMAND share (half of the allocated
 * bytes): with the full configured cap the caches kept the pool over its budget and every reclaim
 * flushed them. Costs and the measurements behind these constants: docs/benchmarks.md, "MAPPED".
 *
 * <h2>Locking: no source call under a lock an allocation needs</h2>
 * <ul>
 *   <li>An allocation served from mapped memory (a local hit, or a global run whose units are all
 *       mapped) takes order locks and the bitmap monitor of its chunk for a read; neither is ever
 *       held across a source call, and it never takes the grow lock.</li>
 *   <li>A map runs on the allocating thread after it took its run, holding nothing: where an extent is
 *       one unit the run owns its units; else it claims its unmapped extents under the bitmap monitor
 *       ({@link #mapExtents}) and waits only for an extent another run is mapping, which it needs.</li>
 *   <li>{@link RetainedHandles} holds its monitor only to push and pop kept handles.</li>
 *   <li>The grow lock serialises growth, reclaims, recovery and trim; reclaims unmap under it, so a
 *       map that must reclaim first, a miss that must grow and a recovery wait for each other, but
 *       never an allocation from mapped memory. Growing address space calls the source under it.</li>
 *   <li>The CUDA source holds a reservation's monitor only around its bookkeeping in the physical
 *       calls, so maps of one address-space chunk proceed in parallel.</li>
 * </ul>
 */
final class MappedGrowth extends Growth {

    /** The slack never falls below this many minimum blocks (small pools do not remap constantly). */
    static final int SLACK_FLOOR_UNITS = 8;
    /** Runs of at least this size live in address-space chunks of their own. */
    static final long LARGE_RUN_BYTES = 64L << 20;
    /** Large chunks map and unmap extents of this size, small chunks of {@link PoolConfig#mappedExtentBytes()}. */
    static final long LARGE_EXTENT_BYTES = PoolConfig.MAX_MAPPED_EXTENT_BYTES;
    /** An address-space chunk holds this many maximum blocks (spans of up to this size fit in one). */
    static final int ADDRESS_CHUNK_MAX_BLOCKS = 4;
    /** A stream caches at most this many times the ON_DEMAND share of allocated bytes. */
    static final int LOCAL_SHARE_FACTOR = 4;

    private final VirtualMemory memory;
    /** The physical allocations behind the mapped units, and those kept for reuse. */
    final RetainedHandles handles;
    /** The source's mapping granularity: the size of a physical allocation where an extent is one unit. */
    private final long granule;
    /** Bytes of address space reserved (mapped or not). */
    private final AtomicLong addressSpace = new AtomicLong();
    /** The most bytes allocated at once since {@link #maintain} last reset it; see {@link #budget}. */
    private final AtomicLong highWater = new AtomicLong();
    /** When {@link #highWater} last rose ({@link CoarseClock}). */
    private volatile long highWaterRaisedNanos;

    MappedGrowth(VirtualMemory memory, GlobalLevel global, Reservation reservation, PoolStatistics stats,
                 StreamLevel streams, DedicatedChunks dedicated, Supplier<PoolConfig> config, ReentrantLock growLock) {
        super(global, reservation, stats, streams, dedicated, config, growLock);
        this.memory = memory;
        this.handles = new RetainedHandles(memory, reservation, config);
        this.granule = memory.granularity();
    }

    /** Runs of at least this many units come from large chunks. */
    static int largeUnits(int unitShift) {
        return Math.max(2, (int) (LARGE_RUN_BYTES >>> unitShift));
    }

    @Override
    long place(int units, AllocationStream stream) {
        BuddyLevel buddy = global.buddy;
        long handle = -1;
        if (units <= global.maxUnits) {
            handle = buddy.allocate(units, stream, true);          // mapped, and B need not wait for it
            if (handle < 0 && units > 1) {
                buddy.coalesceAll();                               // freed runs lie in pieces until merged
                handle = buddy.allocate(units, stream, true);
            }
            long mapLimit = config.get().waitBeyondBudget() ? Math.min(budget(), reservation.capBytes())
                    : reservation.capBytes();
            if (handle < 0 && reservation.reserved() + ((long) units << global.unitShift) > mapLimit) {
                handle = buddy.allocate(units, null, true);        // no room to map: a wait beats a recovery
            }
            if (handle < 0 && units > 1) {
                handle = MostMappedChoice.take(global, units, stream);  // B need not wait; the least to map
            }
            if (handle < 0) {
                handle = buddy.allocate(units, stream);            // B need not wait; map all of it
            }
            if (handle < 0) {
                handle = buddy.allocate(units, null, true);        // mapped, B waits
            }
            if (handle < 0 && units > 1) {
                handle = MostMappedChoice.take(global, units, null);    // the fewest bytes to map
            }
        }
        if (handle < 0 && units <= global.maxUnits) {
            handle = buddy.allocate(units, stream);
        }
        return handle;
    }

    @Override
    long allocateLarge(long bytes, AllocationStream stream, RunAllocator runs) {
        if (bytes <= global.maxSpanBytes) {
            return runs.allocateRun((int) ((bytes + global.minBlock - 1) >>> global.unitShift), stream, bytes);
        }
        return allocateDedicated(bytes, stream);
    }

    /** Maps every unmapped unit of a run the caller holds (in a large chunk: every extent it touches). */
    @Override
    void afterTake(long handle, long requested) {
        Chunk chunk = global.chunks.get(Handles.chunkId(handle));
        long to = Handles.offset(handle) + Handles.length(handle);
        long position = Handles.offset(handle);
        int extent = chunk.extentUnits;
        if (extent > 1) {
            long from = position / extent * extent;
            long end = Math.min(chunk.units, (to + extent - 1) / extent * extent);
            mapExtents(chunk, from, end, extent, requested);      // a neighbour run may share an end extent
            return;
        }
        mapStretches(chunk, position, to, 0, requested);
    }

    /** Grows address space, which costs no memory; flushes only once it is far beyond the cap. */
    @Override
    boolean flushesBeforeGrowing(long bytes) {
        return addressSpace.get() + bytes > 2 * reservation.capBytes();
    }

    @Override
    OutOfDeviceMemoryException growOnMiss(int units, long blockBytes) {
        try {
            growFor(units, Math.max(blockBytes, ADDRESS_CHUNK_MAX_BLOCKS * global.maxBlock));
            return null;
        } catch (OutOfDeviceMemoryException e) {
            return e;
        }
    }

    /** Reserves one address-space chunk of whole extents: no memory yet. */
    @Override
    void grow(long bytes, boolean large) {
        int unitShift = global.unitShift;
        long capped = Math.min(bytes, Handles.MAX_CHUNK_UNITS << unitShift);
        long extent = Math.max(global.minBlock, Math.min(global.maxBlock, LARGE_EXTENT_BYTES));
        long size = (capped + extent - 1) / extent * extent;
        long address = memory.reserveAddressSpace(size);
        addressSpace.addAndGet(size);
        Chunk chunk = global.chunks.add(id -> {
            Chunk c = new Chunk(id, address, size, size >>> unitShift, false, true);
            c.large = large;
            c.extentUnits = (int) Math.max(1, Math.min(global.maxUnits,
                    (large ? LARGE_EXTENT_BYTES : smallExtentBytes()) >>> unitShift));
            return c;
        });
        global.buddy.addChunk(chunk);
        stats.grows.increment();
    }

    /**
     * The extent of a new small chunk: the configured one, but at most an eighth of the cap (a pool capped at
     * a few extents would otherwise map a whole extent for its first small block), at least a minimum block.
     */
    private long smallExtentBytes() {
        long eighthOfCap = Long.highestOneBit(Math.max(1, reservation.capBytes() / 8));
        return Math.max(global.minBlock, Math.min(config.get().mappedExtentBytes(), eighthOfCap));
    }

    @Override
    long releaseChunk(Chunk chunk) {
        if (!chunk.isAddressSpace()) {
            return super.releaseChunk(chunk);
        }
        global.chunks.remove(chunk);
        chunk.awaitAllFences();
        long released = unmapUnits(chunk, 0, chunk.units);
        memory.releaseAddressSpace(chunk.address, chunk.bytes);
        addressSpace.addAndGet(-chunk.bytes);
        stats.trims.increment();
        return released;
    }

    @Override
    long returnFreeMemory() {
        return reclaimMapped(0, false, true) + handles.release(0);
    }

    /** A lower cap: kept physical memory goes until the reserved bytes fit (or none is kept). */
    @Override
    void afterCapChange() {
        long over = reservation.reserved() - reservation.capBytes();
        if (over > 0) {
            handles.release(Math.max(0, handles.keptBytes() - over));
        }
    }

    @Override
    void afterClose() {
        handles.release(0);
    }

    /**
     * When demand fell for releaseIdleAge, the budget follows it and free mapped memory above it goes.
     * Under {@link BudgetReclaim#PERIODIC} free mapped memory above the budget goes at every call, the
     * local caches left alone (they have their own bound, and flushing them would send the next
     * requests to the global level).
     */
    @Override
    long maintain(long now, PoolConfig cfg) {
        long released = 0;
        if (now - highWaterRaisedNanos >= cfg.releaseIdleAge().toNanos()) {
            highWater.set(stats.allocatedBytes());
            highWaterRaisedNanos = now;
            released = reclaimMapped(Math.max(cfg.releaseThresholdBytes(), budget()), true, false);
        } else if (cfg.budgetReclaim() == BudgetReclaim.PERIODIC) {
            released = reclaimMapped(Math.max(cfg.releaseThresholdBytes(), budget()), false, false);
        }
        return released + handles.releaseIdle(now, cfg.releaseIdleAge().toNanos());   // kept, unused that long
    }

    @Override
    long retainedHandleBytes() {
        return handles.keptBytes();
    }

    @Override
    long retainedHandles() {
        return handles.keptCount();
    }

    @Override
    long physicalCreates() {
        return handles.creates.sum();
    }

    @Override
    long physicalReleases() {
        return handles.releases.sum();
    }

    @Override
    long sizedBytes() {
        return addressSpace.get();
    }

    @Override
    long addressSpaceBytes() {
        return addressSpace.get();
    }

    /**
     * Mapped memory in the buddy free lists: per address-space chunk, mapped units minus units outside
     * the free lists (runs handed out or cached, slabs; all of those are mapped). Racy, a few chunks to read.
     */
    @Override
    long globalFreeBytes() {
        long units = 0;
        for (Chunk chunk : global.chunks.all()) {
            if (chunk.isAddressSpace()) {
                units += Math.max(0, chunk.mappedUnits - chunk.liveUnits.get());
            }
        }
        return units << global.unitShift;
    }

    // ------------------------------------------------------------------ map and unmap

    /** Maps each unmapped stretch of [position, to), in extents of {@code extentBytes} (0: granules). */
    private void mapStretches(Chunk chunk, long position, long to, long extentBytes, long requested) {
        if (chunk.countMappedSettled(position, to) == to - position) {
            return;                                                // all mapped (the usual case): no monitor
        }
        forEachStretch(chunk, position, to, false, (start, end) -> mapUnits(chunk, start, end, extentBytes, requested));
    }

    /**
     * Maps the unmapped extents of [from, end) of a large chunk with no lock held across the source
     * calls: under the bitmap monitor, the first stretch of extents that are neither mapped nor being
     * mapped is claimed ({@link Chunk#markBeingMapped}); it is mapped with one call, published, and the
     * claim withdrawn with a notification. An extent another run is mapping is waited for on the
     * monitor, and claimed in its turn if that map failed. A run whose extents are all mapped
     * returns at once, whatever other threads are mapping.
     */
    private void mapExtents(Chunk chunk, long from, long end, int extent, long requested) {
        long extentBytes = (long) extent << global.unitShift;
        boolean interrupted = false;
        try {
            while (true) {
                long start = -1;
                long stop = -1;
                synchronized (chunk.mapped) {
                    boolean othersMapping = false;
                    for (long e = from; e < end; e += extent) {
                        if (chunk.isMapped(e) || chunk.isBeingMapped(e)) {
                            othersMapping |= !chunk.isMapped(e);
                            if (start >= 0) {
                                break;                             // one stretch per source call
                            }
                            continue;
                        }
                        if (start < 0) {
                            start = e;
                        }
                        stop = e + extent;
                        chunk.markBeingMapped(e, true);
                    }
                    if (start < 0) {
                        if (!othersMapping) {
                            return;                                // everything the run needs is mapped
                        }
                        try {
                            chunk.mapped.wait();                   // another run maps a shared extent
                        } catch (InterruptedException e) {
                            interrupted = true;                    // the run needs the memory: keep waiting
                        }
                        continue;
                    }
                }
                try {
                    mapUnits(chunk, start, stop, extentBytes, requested);
                } finally {
                    synchronized (chunk.mapped) {
                        for (long e = start; e < stop; e += extent) {
                            chunk.markBeingMapped(e, false);
                        }
                        chunk.mapped.notifyAll();
                    }
                }
            }
        } finally {
            if (interrupted) {
                Thread.currentThread().interrupt();
            }
        }
    }

    /** What to do with one stretch [start, end) of units found by {@link #forEachStretch}. */
    @FunctionalInterface
    private interface StretchAction {
        void apply(long start, long end);
    }

    /**
     * Calls {@code action} for each maximal stretch of [from, to) whose units are mapped (or, with
     * {@code mapped} false, unmapped), lowest first. The caller holds the units; the bitmap monitor is
     * taken only to read it, so the action may call the source.
     */
    private static void forEachStretch(Chunk chunk, long from, long to, boolean mapped, StretchAction action) {
        long position = from;
        while (position < to) {
            long start;
            long end;
            synchronized (chunk.mapped) {
                start = chunk.nextUnit(position, to, mapped);
                end = chunk.nextUnit(start, to, !mapped);
            }
            if (start >= to) {
                return;
            }
            action.apply(start, end);
            position = end;
        }
    }

    private void mapUnits(Chunk chunk, long start, long end, long extentBytes, long requested) {
        long bytes = (end - start) << global.unitShift;
        long address = chunk.address + (start << global.unitShift);
        long extent = extentBytes > 0 ? extentBytes : granule;
        makeRoomToMap(bytes);
        try {
            mapAt(address, bytes, extent);                          // takes the cap for what is not kept
        } catch (OutOfDeviceMemoryException refused) {
            fallback().recoverAndRetry(requested, () -> {
                mapAt(address, bytes, extent);
                return null;
            });
        }
        synchronized (chunk.mapped) {
            chunk.markMapped(start, end, true);
        }
        stats.maps.increment();
        reservation.raisePeak();
    }

    /**
     * Checks the budget before a map of {@code bytes} (step 3). While mapping stays within the budget,
     * free mapped memory is left alone (later requests reuse it at no cost); beyond it, free mapped
     * memory of the global level is unmapped first, then the caches are flushed if needed. The budget
     * counts mapped bytes: physical memory kept for reuse ({@link RetainedHandles}) is what the map
     * takes first, and what a reclaim here unmaps is kept for it.
     */
    private void makeRoomToMap(long bytes) {
        long allocatedAfter = stats.allocatedBytes() + bytes;
        if (Peaks.raise(highWater, allocatedAfter)) {
            highWaterRaisedNanos = System.nanoTime();             // beside a map call, a clock read is nothing
        }
        if (config.get().budgetReclaim() == BudgetReclaim.PERIODIC) {
            long cap = reservation.capBytes();
            if (mappedBytes() + bytes > cap) {                       // the cap is a limit: make room now
                reclaimNow(cap - bytes);
            }
            return;                                                  // the budget waits for maintenance
        }
        long budget = budget();
        if (mappedBytes() + bytes > budget) {
            // hysteresis: unmap reclaimHysteresis of the slack below the budget too, so that the next maps
            // fit without a reclaim each
            long slack = budget - highWater.get();
            reclaimNow(budget - bytes - (long) (slack * config.get().reclaimHysteresis()));
        }
    }

    private void reclaimNow(long target) {
        growLock.lock();
        try {
            reclaimMapped(target, true, false);
        } finally {
            growLock.unlock();
        }
    }

    /** Reserved bytes that are mapped (or in chunks of other kinds): not the physical memory kept unmapped. */
    private long mappedBytes() {
        return reservation.reserved() - handles.keptBytes();
    }

    private void mapAt(long address, long bytes, long extentBytes) {
        long started = System.nanoTime();
        try {
            handles.map(address, bytes, extentBytes);
        } finally {
            stats.mapNanos.add(System.nanoTime() - started);
        }
    }

    /** Mapped bytes the pool may hold: the allocated high-water mark plus the slack (at least the floor). */
    private long budget() {
        long mark = highWater.get();
        return mark + Math.max(SLACK_FLOOR_UNITS * global.minBlock, (long) (mark * config.get().mappedSlack()));
    }

    /**
     * Unmaps free mapped memory of the global level until reserved bytes are at most {@code target}
     * (step 4): first blocks whose units have no unfinished fence; with {@code flushCaches}, then the
     * local caches and empty slabs go back to the global level and it continues with such blocks; with
     * {@code waitForFences} (trim, out-of-memory recovery), last any block, waiting on the host for the
     * fences of its units. A reclaim for the budget never waits: the budget is a target, the cap is the
     * limit. Grow lock held.
     *
     * @return bytes unmapped
     */
    private long reclaimMapped(long target, boolean flushCaches, boolean waitForFences) {
        global.releaseEmptySlabs();                               // empty slabs first become free runs
        long unmapped = 0;
        for (int pass = 0; pass < 3; pass++) {
            long excess = mappedBytes() - Math.max(0, target);
            if (excess <= 0) {
                break;
            }
            if (pass == 1) {
                if (!flushCaches) {
                    continue;
                }
                fallback().flushAndCoalesce();                     // caches and empty slabs back, coalesce
                excess = mappedBytes() - Math.max(0, target);
            } else if (pass == 2 && !waitForFences) {
                break;
            }
            long units = (excess + global.minBlock - 1) >>> global.unitShift;
            unmapped += unmapTaken(ReclaimChoice.takeFree(global, units, pass < 2, config.get().reclaimOrder()));
        }
        if (unmapped > 0) {
            stats.reclaims.increment();
        }
        return unmapped;
    }

    private long unmapTaken(long[] handles) {
        long unmapped = 0;
        for (long handle : handles) {
            Chunk chunk = global.chunks.get(Handles.chunkId(handle));
            long from = Handles.offset(handle);
            chunk.awaitFences(from, Handles.length(handle));      // a stream may still use these units
            unmapped += unmapUnits(chunk, from, from + Handles.length(handle));
            global.buddy.free(handle);
        }
        return unmapped;
    }

    /**
     * Unmaps the mapped stretches of [from, to) of a chunk whose units the caller holds; the physical
     * memory is kept for reuse within its bound. @return bytes released to the source
     */
    private long unmapUnits(Chunk chunk, long from, long to) {
        long[] released = {0};
        long extent = chunk.extentUnits > 1 ? (long) chunk.extentUnits << global.unitShift : granule;
        forEachStretch(chunk, from, to, true, (start, end) -> {
            long bytes = (end - start) << global.unitShift;
            long started = System.nanoTime();
            released[0] += handles.unmap(chunk.address + (start << global.unitShift), bytes, extent);
            stats.unmapNanos.add(System.nanoTime() - started);
            synchronized (chunk.mapped) {
                chunk.markMapped(start, end, false);
            }
            stats.unmaps.increment();
        });
        return released[0];
    }
}
