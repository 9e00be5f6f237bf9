package io.gpupool.memory.pool;

import io.gpupool.memory.AllocationStream;
import io.gpupool.memory.PoolConfig;
import io.gpupool.memory.StreamFence;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;

/**
 * The global level's structures and the operations on them that never grow the pool: the chunk
 * table, the buddy level, the small-object slabs, the class table, handle decoding, frees into the
 * level and the cross-stream fences.
 *
 * <h2>Class indices</h2>
 * <pre>
 *   c = 0 .. S-1          small-object class (bytes &lt; minBlock; SizeClasses)       -&gt; SmallObjects
 *   c = S + n - 1         run of n = ceil(bytes / minBlock) minimum blocks, n &lt;= maxUnits -&gt; BuddyLevel
 *   bytes &gt; maxBlock      a span (n &gt; maxUnits, never cached) or a dedicated chunk   -&gt; Growth
 * </pre>
 *
 * <h2>Cross-stream safety</h2>
 * Memory moving from stream A to the global level (local overflow, trim, idle flush, every free in
 * GLOBAL_ONLY mode) gets a fence recorded on A (with {@code lazyFences} a {@link LazyFence}, recorded only
 * when another stream takes the memory before A synchronised), kept per unit of its chunk ({@link Chunk#addFence};
 * a small object's in its slab's {@link FenceSet}). A stream B taking a run is made to wait
 * (device-side) on the pending fences of other streams on exactly the run's units, which are then
 * cleared (B's own later fence implies them); completed fences are dropped. Per unit and not per
 * chunk, so B waits only for the streams that last freed those very units, and a reclaim can unmap
 * the free units whose fences completed. The placement is also opportunistic (as the driver's
 * stream-ordered allocator is by default): a run for B comes first from a block with no unfinished
 * fence of another stream ({@link BuddyLevel#allocate(int, AllocationStream)}), a small object first
 * from a slab with none ({@link SmallObjects#take}); only when no such memory is free does B take
 * fenced memory and wait. Before memory is unmapped or a chunk goes back to the source, its fences
 * are awaited on the host.
 *
 * <h2>Concurrency</h2>
 * One lock per buddy order and one per small class; merges hold two adjacent order locks, chunk
 * release holds all. Fence-set monitors are leaves.
 */
final class GlobalLevel implements LocalCache.GlobalFree {

    final long minBlock;
    final int unitShift;
    final long maxBlock;
    /** maxBlock in minimum blocks. */
    final int maxUnits;
    /** Largest span a handle can describe (16-bit length in minimum blocks); larger requests get dedicated chunks. */
    final long maxSpanBytes;
    final SizeClasses classes;
    final int smallCount;
    private final long largestSmall;
    private final long[] classBytes;
    final ChunkTable chunks = new ChunkTable();
    final BuddyLevel buddy;
    final SmallObjects small;
    private final Reservation reservation;
    /**
     * Fences recorded on frees into this level and not yet closed (a fence closes once every unit and
     * slab let go of it, which happens lazily after it completed), lazy ones of the dedicated-chunk cache
     * too; 0 means no free memory of the level can be under an unfinished fence.
     */
    final AtomicLong openFences = new AtomicLong();
    /** With {@code lazyFences}: the fence a stream's next free can share. */
    private final LatestLazyFences latestLazy = new LatestLazyFences(openFences);
    /** Frees into this level record no fence; one is recorded only when another stream needs it ({@link LazyFence}). */
    final boolean lazyFences;
    /** Device-side waits on other streams' fences inserted when runs and dedicated chunks were taken. */
    final LongAdder crossStreamWaits = new LongAdder();

    /**
     * @param largeUnits runs of at least this many units come only from large chunks (MAPPED), 0 for none
     */
    GlobalLevel(PoolConfig config, int largeUnits, Reservation reservation) {
        this.reservation = reservation;
        this.lazyFences = config.lazyFences();
        this.minBlock = config.minBlockBytes();
        this.unitShift = Long.numberOfTrailingZeros(minBlock);
        this.maxBlock = config.maxBlockBytes();
        this.classes = new SizeClasses(minBlock);
        this.smallCount = classes.count();
        this.largestSmall = classes.size(smallCount - 1);
        this.maxUnits = (int) (maxBlock >>> unitShift);
        this.maxSpanBytes = Math.min(Handles.LENGTH_MASK, Handles.MAX_CHUNK_UNITS) << unitShift;
        this.classBytes = new long[smallCount + maxUnits];
        for (int c = 0; c < classBytes.length; c++) {
            classBytes[c] = c < smallCount ? classes.size(c) : (long) (c - smallCount + 1) << unitShift;
        }
        this.buddy = new BuddyLevel(chunks, Long.numberOfTrailingZeros(maxUnits), config.coalesceThreshold(), largeUnits);
        this.small = new SmallObjects(classes);
    }

    /** Bytes of each class index; shared with the local caches, never written after construction. */
    long[] classBytes() {
        return classBytes;
    }

    /** The class index of a request of at most maxBlock bytes. */
    int classIndex(long bytes) {
        return bytes <= largestSmall ? classes.indexOf(bytes) : smallCount + (int) ((bytes + minBlock - 1) >>> unitShift) - 1;
    }

    int classOf(long handle) {
        return Handles.kind(handle) == Handles.KIND_SMALL ? Handles.sizeClass(handle)
                : smallCount + (int) Handles.length(handle) - 1;
    }

    /** Whether a run handle is a span (longer than the maximum block: never cached). */
    boolean isSpan(long handle) {
        return Handles.kind(handle) == Handles.KIND_RUN && Handles.length(handle) > maxUnits;
    }

    long roundUp(long bytes) {
        return (bytes + minBlock - 1) & -minBlock;
    }

    long address(long handle) {
        long kind = Handles.kind(handle);
        if (kind == Handles.KIND_RUN) {
            return chunks.get(Handles.chunkId(handle)).address + (Handles.offset(handle) << unitShift);
        }
        if (kind == Handles.KIND_SMALL) {
            return small.address(handle);
        }
        return chunks.get(Handles.dedicatedChunkId(handle)).address;
    }

    /** The bytes a span or a dedicated chunk holds. */
    long largeSize(long handle) {
        return Handles.kind(handle) == Handles.KIND_DEDICATED ? chunks.get(Handles.dedicatedChunkId(handle)).bytes
                : Handles.length(handle) << unitShift;
    }

    /** A run of at most one maximum block, or (ON_DEMAND) a span of adjacent maximum blocks; -1 if none is free. */
    long tryAllocate(int units) {
        return units > maxUnits ? buddy.allocateSpan(units, -1) : buddy.allocate(units);
    }

    /**
     * Makes {@code stream} wait (device-side) for the other streams' unfinished work on the units of
     * run {@code handle}, which the caller now holds, and clears the units' fences: whatever the
     * stream later does with them is ordered after that work. With {@code keep} (a new slab) the
     * fences move there instead, so every later taker of the slab's objects waits for them too.
     */
    void waitForRun(long handle, AllocationStream stream, FenceSet keep) {
        int own = lazyFences && keep == null ? stream.ordinal() : -1; // lazy: the stream's own fences are the common case
        FenceSet fences = chunks.get(Handles.chunkId(handle))
                .takeFences(Handles.offset(handle), Handles.length(handle), keep, own);
        if (fences != null) {
            int waits = fences.makeWait(stream);
            if (waits > 0) {
                crossStreamWaits.add(waits);
            }
            if (fences != keep) {
                fences.clear();
            }
        }
    }

    /** Makes {@code stream} wait for the last users of a dedicated chunk it takes from the cache. */
    void waitForDedicated(Chunk chunk, AllocationStream stream) {
        FenceSet fences = chunk.takeFences(0, 1, null);
        if (fences != null) {
            crossStreamWaits.add(fences.makeWait(stream));
            fences.clear();
        }
    }

    /**
     * Frees handles from {@code stream} into the global level under one fence recorded on the stream, or none
     * when {@code settled} (the stream finished all work that used them).
     */
    @Override
    public void returnToGlobal(AllocationStream stream, long[] handles, int from, int to, boolean settled) {
        FenceSet.Shared fence = settled ? null : fenceFor(stream, openFences);
        List<SmallObjects.Slab> released = null;
        try {
            for (int i = from; i < to; i++) {
                long handle = handles[i];
                if (Handles.kind(handle) == Handles.KIND_SMALL) {
                    if (released == null) {
                        released = new ArrayList<>();
                    }
                    small.giveBack(handles, i, i + 1, fence, released);
                } else {
                    if (fence != null) {
                        chunks.get(Handles.chunkId(handle))
                                .addFence(Handles.offset(handle), Handles.length(handle), fence);
                    }
                    buddy.free(handle);
                }
            }
        } finally {
            if (fence != null) {
                fence.release();
            }
        }
        if (released != null) {
            released.forEach(this::returnSlab);
        }
    }

    /**
     * The fence for memory leaving {@code stream} for this level now, or null when nothing is queued to
     * wait for: with {@code lazyFences} a {@link LazyFence} (no driver call; shared with the stream's other
     * frees since its last synchronisation, counted in {@link #openFences}), else one recorded now.
     *
     * @param open counts a recorded fence until it closes (null: not counted)
     */
    FenceSet.Shared fenceFor(AllocationStream stream, AtomicLong open) {
        if (lazyFences) {
            long mark = stream.syncMark();
            if (stream.synchronizedSince(mark)) {
                return null;                                       // a stream with nothing queued (trace replay)
            }
            return latestLazy.fenceFor(stream, mark);
        }
        StreamFence recorded = stream.recordFence();
        if (recorded.isComplete()) {
            recorded.close();                                      // nothing queued: no one needs to wait
            return null;
        }
        return new FenceSet.Shared(recorded, stream.ordinal(), open);
    }

    /** With {@code lazyFences}: records the fences of streams that may have gone idle since their last free. */
    void recordIdleLazyFences() {
        if (lazyFences) {
            latestLazy.recordUnfinished();
        }
    }

    /** An empty slab's run goes back to the buddy level, its fences to the run's units. */
    void returnSlab(SmallObjects.Slab slab) {
        Chunk chunk = chunks.get(Handles.chunkId(slab.runHandle));
        chunk.putFences(Handles.offset(slab.runHandle), Handles.length(slab.runHandle), slab.fences);
        slab.fences.clear();
        buddy.free(slab.runHandle);
    }

    /** Returns every empty slab's run to the buddy level. */
    void releaseEmptySlabs() {
        List<SmallObjects.Slab> slabs = new ArrayList<>();
        small.releaseEmpty(slabs);
        slabs.forEach(this::returnSlab);
    }

    /**
     * Returns a detached chunk of device memory (not address space) to the source after its fences
     * completed; grow lock held, or the chunk is no longer reachable. The caller counts the trim.
     *
     * @return bytes given back
     */
    long releaseMemoryChunk(Chunk chunk) {
        chunks.remove(chunk);
        chunk.awaitAllFences();
        reservation.freeChunk(chunk.address, chunk.bytes);
        return chunk.bytes;
    }

    /**
     * Free units of the buddy lists that cost memory (under MAPPED: mapped ones) and still carry an
     * unfinished fence; a copy of each order's list, then a look at each unit's fences (drops the
     * completed ones on the way). For metrics and the replay's breakdown, not for allocation.
     */
    long fencedFreeUnits() {
        long[][] free = buddy.snapshotFree();
        long units = 0;
        for (int k = 0; k < free.length; k++) {
            for (long key : free[k]) {
                Chunk chunk = chunks.get(Handles.keyChunk(key));
                if (chunk == null) {
                    continue;
                }
                long from = Handles.keyOffset(key);
                for (long u = from, end = Math.min(chunk.units, from + (1L << k)); u < end; u++) {
                    boolean costs = !chunk.isAddressSpace();
                    if (!costs) {
                        synchronized (chunk.mapped) {
                            costs = chunk.countMapped(u, u + 1) == 1;
                        }
                    }
                    if (costs && chunk.fencesPending(u, 1)) {
                        units++;
                    }
                }
            }
        }
        return units;
    }
}
