package io.gpupool.memory.pool;

import io.gpupool.memory.AllocationStream;

/**
 * The first choice for a run while the device runs behind the host: a free block that the asking
 * stream freed itself and whose fences are only its own.
 *
 * <h2>Why</h2>
 * A block freed by stream A while A's kernels may still use it carries A's unfinished fence. Until
 * that fence completes, only A can take the block without a wait (its work is ordered), no other
 * stream can take it without waiting for A, and no reclaim unmaps or returns it (a reclaim for the
 * budget never waits). If A takes other free memory instead (the lowest clear block, or fresh
 * mapped memory), its own freed blocks lie stranded beside it and the pool holds both. Taking A's own
 * freed memory first is what the replay's no-wait reference does ("own freed bytes first"); the
 * measurements are in docs/benchmarks.md, "Request-end fences".
 *
 * <pre>
 *   units of one chunk:   | A* | A* | B* | .. | A* | A* | A* | A* |   X* = free, pending fence of X
 *                                                                   .. = free, no pending fence
 *   A asks for 4 units:   the aligned block [4, 8) is held only by A  -&gt; A takes it, no wait
 *   B asks for 4 units:   nothing held only by B                       -&gt; the usual placement
 * </pre>
 *
 * <h2>Steps</h2>
 * <ol>
 *   <li>No fence of the global level is open ({@link GlobalLevel#openFences}): -1 at once. With a
 *       device that keeps up (fences complete when recorded, none is kept) this is the only cost.</li>
 *   <li>For orders k = ceil(log2 units) .. top, read the order's free list without its lock (a hint);
 *       a candidate is a block whose chunk serves the run ({@link BuddyLevel#servesRun}), whose first
 *       {@code units} units are held only by the stream ({@link Chunk#heldOnlyBy}) and, in address
 *       space, all mapped. The first order with a candidate wins (the tightest block keeps larger own
 *       blocks for larger requests), and in it the lowest key.</li>
 *   <li>Take the winner under its order lock ({@link BuddyLevel#take}); gone meanwhile: -1, and the
 *       placement goes on with its usual steps.</li>
 * </ol>
 * No lock of its own, and none taken in the common case: the mapped bits and a unit's only fence are
 * read as hints (a wrong one costs a map or a wait that {@link Growth#afterTake} and
 * {@link GlobalLevel#waitForRun} perform for the winner anyway); a unit holding fences of several streams
 * is sorted under its chunk's fence lock.
 */
final class OwnFreedFirst {

    private final GlobalLevel global;

    OwnFreedFirst(GlobalLevel global) {
        this.global = global;
    }

    /** A free run of {@code units} (at most the maximum block) held only by {@code stream}, or -1. */
    long allocate(int units, AllocationStream stream) {
        if (global.openFences.get() == 0) {
            return -1;                                             // step 1
        }
        BuddyLevel buddy = global.buddy;
        for (int j = BuddyLevel.ceilLog2(units); j <= buddy.topOrder(); j++) {    // step 2
            if (buddy.freeBlocks(j) == 0) {
                continue;
            }
            long best = -1;
            for (int i = 0, n = buddy.freeSlotsUnlocked(j); i < n; i++) {
                long key = buddy.freeKeyUnlocked(j, i);
                if (key < 0 || (best >= 0 && key > best)) {
                    continue;
                }
                Chunk chunk = global.chunks.get(Handles.keyChunk(key));
                if (chunk != null && qualifies(chunk, Handles.keyOffset(key), units, stream)) {
                    best = key;
                }
            }
            if (best >= 0) {
                return buddy.take(j, best, units);                 // step 3
            }
        }
        return -1;
    }

    private boolean qualifies(Chunk chunk, long offset, int units, AllocationStream stream) {
        if (chunk.dedicated || !global.buddy.servesRun(chunk, units) || offset + units > chunk.units) {
            return false;
        }
        if (chunk.isAddressSpace() && chunk.countMapped(offset, offset + units) != units) {
            return false;                      // read without the monitor: a hint, like the free list read
        }
        return chunk.heldOnlyBy(offset, units, stream);
    }
}
