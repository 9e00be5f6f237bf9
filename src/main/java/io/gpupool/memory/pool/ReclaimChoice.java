package io.gpupool.memory.pool;

import io.gpupool.memory.ReclaimOrder;

import java.util.Arrays;

/**
 * Which free blocks one reclaim of MAPPED growth takes out of the buddy lists to unmap: enough to
 * hold {@code wantUnits} mapped units, largest order first, and within an order in the
 * {@link ReclaimOrder} the pool is configured with.
 *
 * <h2>Why the order within an order matters</h2>
 * A model frees a layer's blocks and asks for blocks of the same sizes again moments later. A
 * reclaim that unmaps those makes the next layer map them again (two driver calls for nothing);
 * unmapping the blocks freed longest ago keeps the working set mapped. Largest order first stays:
 * one unmap then frees the most memory.
 *
 * <pre>
 *   order k free list, each block with its free stamp (higher = freed more recently):
 *     key:    c0/0   c0/8   c1/0   c1/8          HIGHEST_ADDRESS  takes c1/8, c1/0, c0/8, ...
 *     stamp:   41     97     12     63           COLDEST_IN_ORDER takes c1/0 (12), c0/0 (41), c1/8 (63), ...
 * </pre>
 *
 * <h2>Free stamps</h2>
 * {@link BuddyLevel} keeps one stamp per free block of an address-space chunk ({@link Chunk#freeStamp}):
 * a free of a run takes the next value of a counter, the pieces a split or a tail trim pushes back
 * keep the stamp of the block they came from, and a merge keeps the newer stamp of the two buddies
 * (the merged block holds memory freed that recently). O(1) per push; the order is built here, only
 * when a reclaim runs.
 *
 * <h2>Steps (every order lock held, {@link BuddyLevel#takeFree})</h2>
 * <ol>
 *   <li>For k = top .. 0 while fewer than {@code wantUnits} mapped units are taken: {@link #arrange}
 *       order k's keys so that the last one is the first to take (sorted by key, or by stamp, newest
 *       first, then by key).</li>
 *   <li>From the last key down, {@link #take} a block if it lies in an address-space chunk (a small one
 *       where large chunks are skipped), covers whole extents (only whole extents unmap), has mapped
 *       units and, with {@code clearOnly}, no unfinished fence (nobody waits to unmap it); count its
 *       mapped units.</li>
 * </ol>
 * One instance per reclaim; it holds the running count and a scratch array for the stamps.
 */
final class ReclaimChoice implements FreeBlockChooser {

    private final ChunkTable chunks;
    private final long wantUnits;
    private final boolean clearOnly;
    private final ReclaimOrder order;
    /** Whether blocks of large chunks are passed over (the first sweep of {@link ReclaimOrder#SMALL_CHUNKS_FIRST}). */
    private final boolean skipLargeChunks;
    private long gotUnits;
    private long[] stamps = new long[0];

    ReclaimChoice(ChunkTable chunks, long wantUnits, boolean clearOnly, ReclaimOrder order) {
        this(chunks, wantUnits, clearOnly, order, false);
    }

    ReclaimChoice(ChunkTable chunks, long wantUnits, boolean clearOnly, ReclaimOrder order, boolean skipLargeChunks) {
        this.chunks = chunks;
        this.wantUnits = wantUnits;
        this.clearOnly = clearOnly;
        this.order = order;
        this.skipLargeChunks = skipLargeChunks;
    }

    /**
     * Takes free blocks with at least {@code units} mapped units (fewer if there are not so many) out of the
     * global level's lists in {@code order}; under {@link ReclaimOrder#SMALL_CHUNKS_FIRST} in two sweeps, the
     * large chunks only in the second. The blocks count as live until the caller frees them.
     */
    static long[] takeFree(GlobalLevel global, long units, boolean clearOnly, ReclaimOrder order) {
        if (order != ReclaimOrder.SMALL_CHUNKS_FIRST) {
            return global.buddy.takeFree(new ReclaimChoice(global.chunks, units, clearOnly, order));
        }
        ReclaimChoice small = new ReclaimChoice(global.chunks, units, clearOnly, order, true);
        long[] taken = global.buddy.takeFree(small);
        if (small.satisfied()) {
            return taken;
        }
        long[] large = global.buddy.takeFree(new ReclaimChoice(global.chunks, units - small.gotUnits, clearOnly, order));
        long[] both = Arrays.copyOf(taken, taken.length + large.length);
        System.arraycopy(large, 0, both, taken.length, large.length);
        return both;
    }

    @Override
    public boolean satisfied() {
        return gotUnits >= wantUnits;
    }

    /** Step 1: sorts {@code keys[0, n)} so that the first block to take is the last one. */
    @Override
    public void arrange(long[] keys, int n, int k) {
        if (order != ReclaimOrder.COLDEST_IN_ORDER) {
            Arrays.sort(keys, 0, n);
            return;
        }
        if (stamps.length < n) {
            stamps = new long[Math.max(n, 2 * stamps.length)];
        }
        for (int i = 0; i < n; i++) {
            stamps[i] = chunks.get(Handles.keyChunk(keys[i])).freeStamps.stamp(Handles.keyOffset(keys[i]), k);
        }
        sortNewestFirst(keys, stamps, n);
    }

    /** Step 2: whether free block {@code key} of order {@code k} is taken; counts its mapped units if so. */
    @Override
    public boolean take(long key, int k) {
        long size = 1L << k;
        Chunk chunk = chunks.get(Handles.keyChunk(key));
        long offset = Handles.keyOffset(key);
        if (!chunk.isAddressSpace() || size < chunk.extentUnits || (skipLargeChunks && chunk.large)
                || (clearOnly && chunk.fencesPending(offset, size))) {
            return false;
        }
        long mappedUnits;
        synchronized (chunk.mapped) {
            mappedUnits = chunk.countMapped(offset, offset + size);
        }
        gotUnits += mappedUnits;
        return mappedUnits > 0;
    }

    /**
     * Sorts the pairs (stamp, key) by stamp descending, then key ascending, so the last pair is the
     * coldest block and, among equally cold ones, the highest address. A Shell sort over the two
     * parallel arrays: no boxing, and the lists it sorts hold tens to a few hundred keys.
     */
    static void sortNewestFirst(long[] keys, long[] stamps, int n) {
        for (int gap = n / 2; gap > 0; gap = gap == 2 ? 1 : gap * 5 / 11) {
            for (int i = gap; i < n; i++) {
                long key = keys[i];
                long stamp = stamps[i];
                int j = i;
                while (j >= gap && (stamps[j - gap] < stamp || (stamps[j - gap] == stamp && keys[j - gap] > key))) {
                    keys[j] = keys[j - gap];
                    stamps[j] = stamps[j - gap];
                    j -= gap;
                }
                keys[j] = key;
                stamps[j] = stamp;
            }
        }
    }
}
