package io.gpupool.memory.pool;

import io.gpupool.memory.AllocationStream;

import static io.gpupool.memory.pool.Handles.adjacent;
import static io.gpupool.memory.pool.Handles.chunkId;
import static io.gpupool.memory.pool.Handles.key;
import static io.gpupool.memory.pool.Handles.keyChunk;
import static io.gpupool.memory.pool.Handles.keyOffset;
import static io.gpupool.memory.pool.Handles.length;
import static io.gpupool.memory.pool.Handles.offset;

import java.util.Arrays;
import java.util.concurrent.atomic.AtomicIntegerArray;
import java.util.concurrent.atomic.LongAdder;

/**
 * The global level: a binary buddy allocator over chunks, with deferred coalescing and one lock
 * per order.
 *
 * <h2>Notation</h2>
 * <pre>
 *   u      unit = the minimum block (default 2 MiB); all offsets and lengths below are in units
 *   order  k   a block of 2^k units, k = 0 .. top (top: the maximum block, default 2^7 u = 256 MiB)
 *   key    (chunkId << KEY_CHUNK_SHIFT) | offset   one free block in a free list; sorts by chunk, then offset
 *   buddy  of block (offset o, order k) is at o XOR 2^k           (O(1), same chunk)
 * </pre>
 * A chunk of {@code L} units is split at creation into aligned power-of-two roots, largest first
 * (e.g. 300 MiB = 256 + 32 + 8 + 4 MiB). Roots are never merged with each other; two free buddies of
 * a valid block always lie in the same root, so the XOR rule needs no root table.
 *
 * <pre>
 *   chunk (16 u, root order 4)
 *   |<-------------- 8 u -------------->|<---- 4 u ---->|<- 2u ->|<- 2u ->|
 *   | allocated run of 10 u (8 + 2) ...........|  free  | free 4 u        |   request of 10 u:
 *   offset 0                           8      10       12               16  16 u block split once,
 *                                                                             tail 12..16 and 10..12 freed
 * </pre>
 *
 * <h2>Handles</h2>
 * A run handed out is a packed long ({@link Handles#run}: chunk id, offset, length in units); free
 * lists hold keys ({@link Handles#key}: chunk id, offset) of one order each.
 *
 * <h2>Allocate a run of n units (n &lt;= 2^top)</h2>
 * <ol>
 *   <li>k = ceil(log2 n). For j = k .. top: if order j's list is non-empty (racy hint), lock j, pop the
 *       lowest key (address-ordered: oldest chunk, lowest offset; keeps high blocks whole), add 2^j
 *       to the chunk's live units, unlock. None found: return -1 (the pool coalesces or grows).
 *       Variant "clear for stream B" ({@link #allocate(int, AllocationStream)}): pop instead the
 *       lowest key whose first n units have no unfinished fence of another stream ({@link Chunk#fencesBlock}),
 *       so B does not wait on another stream's work (a larger clear block is split before a fenced
 *       one of the right size is taken); none clear in any order: return -1 and the pool takes a
 *       fenced one.</li>
 *   <li>Split: while j &gt; k, j--, push the upper half (offset + 2^j) onto order j.</li>
 *   <li>Tail trimming: the run keeps [o, o + n); the tail [o + n, o + 2^k) is pushed back as the
 *       largest aligned blocks that fit, so a 10 u request holds 10 u, not 16 u.</li>
 * </ol>
 * <h2>Spans (ON_DEMAND, requests above the top order)</h2>
 * A request of n &gt; 2^top units takes m = ceil(n / 2^top) free top-order blocks that lie next to each
 * other in one chunk: lock top, sort its keys, take the lowest run of m keys each 2^top above the
 * previous (same chunk id), unlock, then trim the tail [o + n, o + m 2^top) as above. Top-order
 * blocks never merge, so adjacency is the only way to serve such a request from buddy space; the
 * handle's 16-bit length bounds a span at 2^16 - 1 units.
 *
 * <h2>Large and small chunks (MAPPED growth)</h2>
 * With {@code largeUnits} &gt; 0, runs of at least that many units (and spans) come only from chunks
 * marked {@link Chunk#large} and smaller runs only from the others, so small runs do not split the
 * mapped free blocks a large tensor left behind (docs/benchmarks.md, "MAPPED"). The pool grows a
 * chunk of the class the missing run needs.
 *
 * <h2>Free a run</h2>
 * Decompose [o, o + n) into aligned blocks (largest first) and push each onto its order; nothing
 * merges now (deferred). A push that lifts an order's list above its trigger starts a merge of that order.
 * In address space each free block carries a free stamp for the reclaim order ({@link FreeStamps}):
 * a free takes the next count, split and trimmed pieces keep what their units held, a merge the newer.
 * <h2>Merge order k (coalesce)</h2>
 * <ol>
 *   <li>Lock k, then k + 1 (locks are always taken in ascending order).</li>
 *   <li>Sort order k's keys; a key whose offset has bit k clear and whose successor equals key ^ 2^k
 *       is a buddy pair: both leave order k, the lower key joins order k + 1.</li>
 *   <li>The trigger of order k becomes survivors + threshold (an unmergeable list does not re-sort
 *       on every free); continue with order k + 1 if it passed its trigger, holding its lock.</li>
 * </ol>
 *
 * <h2>Concurrency, and why not one read-write lock</h2>
 * Allocation and free both mutate free lists, so "allocate under a shared lock" would still race on
 * the lists. Instead every order has its own small lock ({@link ShortLock}) and its own array stack; an operation holds
 * one order lock at a time except a merge, which holds two adjacent ones (ascending), and chunk
 * release, which holds all (ascending). Sixteen streams contend only when they touch the same order
 * at the same instant, and the stream-local level in front absorbs most traffic anyway. The critical
 * sections are a few array stores. Free-block counts are mirrored in an {@link AtomicIntegerArray}
 * (written under the order lock, read without it) so metrics and the empty-list hint never lock.
 */
final class BuddyLevel {

    private final ChunkTable chunks;
    private final int top;
    private final ShortLock[] locks;
    private final long[][] lists;
    private final int[] sizes;
    private final int[] triggers;
    private final AtomicIntegerArray counts;
    private volatile int threshold;
    final LongAdder coalesces = new LongAdder();
    /** Frees of address-space runs so far: the next free stamp ({@link FreeStamps}). */
    private final FreeStamps.Clock freeClock = new FreeStamps.Clock();

    /**
     * Runs of at least this many units (and spans) come only from chunks marked {@link Chunk#large},
     * smaller runs only from the others; 0 (no mapping) serves every run from every chunk.
     */
    final int largeUnits;

    BuddyLevel(ChunkTable chunks, int topOrder, int coalesceThreshold) {
        this(chunks, topOrder, coalesceThreshold, 0);
    }

    BuddyLevel(ChunkTable chunks, int topOrder, int coalesceThreshold, int largeUnits) {
        this.largeUnits = largeUnits;
        this.chunks = chunks;
        this.top = topOrder;
        int orders = topOrder + 1;
        locks = new ShortLock[orders];
        lists = new long[orders][];
        sizes = new int[orders];
        triggers = new int[orders];
        counts = new AtomicIntegerArray(orders);
        threshold = coalesceThreshold;
        for (int k = 0; k < orders; k++) {
            locks[k] = new ShortLock();
            lists[k] = new long[16];
            triggers[k] = coalesceThreshold;
        }
    }

    int topOrder() {
        return top;
    }

    void setThreshold(int newThreshold) {
        threshold = newThreshold;
    }

    int freeBlocks(int order) {
        return counts.get(order);
    }

    /** Adds the roots of a chunk already published in the table to the free lists. */
    void addChunk(Chunk chunk) {
        chunk.liveUnits.set(chunk.units);
        freeRange(chunk.id, 0, chunk.units, chunk);
    }

    /**
     * Allocates a run of {@code units} (1 .. 2^top).
     *
     * @return the run's handle, or -1 when no free block is large enough
     */
    long allocate(int units) {
        return allocate(units, null);
    }

    /**
     * Allocates a run of {@code units} (1 .. 2^top) whose units' fences would not make
     * {@code clearFor} wait on another stream (any run when {@code clearFor} is null).
     *
     * @return the run's handle, or -1 when no such free block is large enough
     */
    long allocate(int units, AllocationStream clearFor) {
        return allocate(units, clearFor, false);
    }

    /**
     * Like {@link #allocate(int, AllocationStream)}; with {@code mappedOnly}, only from a block whose
     * first {@code units} units are mapped (MAPPED growth: a run that needs no map call), with
     * {@code clearFor} null meaning any chunk.
     */
    long allocate(int units, AllocationStream clearFor, boolean mappedOnly) {
        int k = ceilLog2(units);
        for (int j = k; j <= top; j++) {
            if (counts.get(j) == 0) {
                continue;
            }
            long key;
            ShortLock lock = locks[j];
            lock.lock();
            try {
                if (sizes[j] == 0) {
                    continue;
                }
                key = clearFor == null && !mappedOnly && largeUnits == 0 ? popLowest(j)
                        : popLowestClear(j, clearFor, mappedOnly ? units : 0, units);
                if (key < 0) {
                    continue;
                }
                chunks.get(keyChunk(key)).liveUnits.addAndGet(1L << j);
            } finally {
                lock.unlock();
            }
            return splitAndTrim(key, j, k, units);
        }
        return -1;
    }

    /**
     * Steps 2 and 3 for a block of order {@code j} taken out of the lists (and counted live): split it
     * down to order {@code k}, pushing the upper halves, then give back the tail beyond {@code units}.
     */
    private long splitAndTrim(long key, int j, int k, int units) {
        int chunkId = keyChunk(key);
        long offset = keyOffset(key);
        Chunk chunk = chunks.get(chunkId);
        chunk.freeStamps.resolveSplit(offset, j, k, units, top);   // the block is ours: no lock needed
        while (j > k) {                                         // step 2: split
            j--;
            push(j, key(chunkId, offset + (1L << j)), chunk);
        }
        freeRange(chunkId, offset + units, offset + (1L << k), chunk);   // step 3: tail trimming
        return Handles.run(chunkId, offset, units);
    }

    /**
     * Takes free block {@code key} of order {@code j} for a run of {@code units} if it is still in the
     * list (a caller chose it on a racy read, {@link #freeKeyUnlocked}), split and trimmed like any run.
     *
     * @return the run's handle, or -1 when another thread took the block meanwhile
     */
    long take(int j, long key, int units) {
        ShortLock lock = locks[j];
        lock.lock();
        try {
            int found = 0;
            while (found < sizes[j] && lists[j][found] != key) {
                found++;
            }
            if (found == sizes[j]) {
                return -1;
            }
            removeAt(j, found);
            chunks.get(keyChunk(key)).liveUnits.addAndGet(1L << j);
        } finally {
            lock.unlock();
        }
        return splitAndTrim(key, j, ceilLog2(units), units);
    }

    /**
     * Allocates a span of {@code units} &gt; 2^top: the lowest run of adjacent free top-order blocks
     * of one chunk that covers it, tail trimmed like a run (see "Spans" in the class comment); with
     * {@code start} &gt;= 0 only the run beginning at that free top-order block (a caller chose it on
     * a racy read).
     *
     * @return the span's handle, or -1 when there is no such run
     */
    long allocateSpan(int units, long start) {
        long step = 1L << top;
        int blocks = (int) ((units + step - 1) >>> top);
        ShortLock lock = locks[top];
        lock.lock();
        try {
            int n = sizes[top];
            if (n < blocks) {
                return -1;
            }
            long[] list = lists[top];
            Arrays.sort(list, 0, n);
            int found = -1;
            int run = 0;
            for (int i = 0; i < n && found < 0; i++) {
                if (!servesRun(chunks.get(keyChunk(list[i])), units)) {
                    run = 0;
                    continue;
                }
                run = i > 0 && run > 0 && adjacent(list[i - 1], list[i], step) && (start < 0 || list[i - 1] >= start)
                        ? run + 1 : start < 0 || list[i] == start ? 1 : 0;
                if (run == blocks) {
                    found = i - blocks + 1;
                }
            }
            if (found < 0) {
                return -1;
            }
            start = list[found];
            System.arraycopy(list, found + blocks, list, found, n - found - blocks);
            sizes[top] = n - blocks;
            counts.lazySet(top, n - blocks);
            chunks.get(keyChunk(start)).liveUnits.addAndGet((long) blocks << top);
        } finally {
            lock.unlock();
        }
        int chunkId = keyChunk(start);
        long offset = keyOffset(start);
        Chunk chunk = chunks.get(chunkId);
        long end = offset + ((long) blocks << top);
        chunk.freeStamps.resolveRange(end - (1L << top), top, offset + units, end, top);
        freeRange(chunkId, offset + units, end, chunk);   // tail trimming
        return Handles.run(chunkId, offset, units);
    }

    /** Whether runs of {@code units} may come from {@code chunk} (the large / small split of MAPPED growth). */
    boolean servesRun(Chunk chunk, long units) {
        return largeUnits == 0 || chunk.large == (units >= largeUnits);
    }

    /** Returns a run handed out by {@link #allocate} or a span from {@link #allocateSpan(int, long)}. */
    void free(long handle) {
        int chunkId = chunkId(handle);
        long offset = offset(handle);
        Chunk chunk = chunks.get(chunkId);
        chunk.freeStamps.stampRange(offset, offset + length(handle), top, freeClock);
        freeRange(chunkId, offset, offset + length(handle), chunk);
    }

    /** Pushes [from, to) as the largest aligned blocks that fit, lowest address first. */
    private void freeRange(int chunkId, long from, long to, Chunk chunk) {
        long position = from;
        while (position < to) {
            int order = FreeStamps.pieceOrder(position, to, top);
            push(order, key(chunkId, position), chunk);
            position += 1L << order;
        }
    }

    private void push(int order, long key, Chunk chunk) {
        boolean merge;
        ShortLock lock = locks[order];
        lock.lock();
        try {
            pushLocked(order, key);
            if (chunk.liveUnits.addAndGet(-(1L << order)) == 0 && chunk.emptySinceNanos != Chunk.EMPTY_UNSTAMPED) {
                chunk.emptySinceNanos = Chunk.EMPTY_UNSTAMPED;     // maintenance stamps it (Chunk#emptySinceNanos)
            }
            merge = order < top && sizes[order] > triggers[order];
        } finally {
            lock.unlock();
        }
        if (merge) {
            coalesce(order, false);
        }
    }

    /**
     * Removes and returns the lowest key of order {@code k} (oldest chunk, lowest offset): address-
     * ordered reuse keeps live blocks packed at low addresses so that high blocks stay whole and
     * merge. A linear scan: lists stay short because merges run once they pass the threshold.
     */
    private long popLowest(int k) {
        long[] list = lists[k];
        int last = sizes[k] - 1;
        int lowest = last;
        for (int i = last - 1; i >= 0; i--) {
            if (list[i] < list[lowest]) {
                lowest = i;
            }
        }
        return removeAt(k, lowest);
    }

    /** Removes the key at index {@code i} of order {@code k}'s list (the last one takes its place); order lock held. */
    private long removeAt(int k, int i) {
        long[] list = lists[k];
        int last = sizes[k] - 1;
        long key = list[i];
        list[i] = list[last];
        sizes[k] = last;
        counts.lazySet(k, last);
        return key;
    }

    /**
     * Like {@link #popLowest} but only among keys whose first {@code runUnits} units' fences do not
     * block {@code stream} (null: any) and, when {@code mappedUnits} &gt; 0, whose block has its first
     * {@code mappedUnits} units mapped (fence and bitmap locks are leaves under the order lock; a
     * chunk of one unit per extent needs none, {@link Chunk#countMappedSettled}); -1 when there is none.
     */
    private long popLowestClear(int k, AllocationStream stream, int mappedUnits, int runUnits) {
        long[] list = lists[k];
        int last = sizes[k] - 1;
        int lowest = -1;
        for (int i = last; i >= 0; i--) {
            long key = list[i];
            if (lowest >= 0 && key > list[lowest]) {
                continue;
            }
            Chunk chunk = chunks.get(keyChunk(key));
            if (!servesRun(chunk, runUnits)) {
                continue;
            }
            if (mappedUnits > 0 && (!chunk.isAddressSpace()       // order lock k held: the bits are settled
                    || chunk.countMappedSettled(keyOffset(key), keyOffset(key) + mappedUnits) != mappedUnits)) {
                continue;
            }
            if (stream != null && chunk.fencesBlock(keyOffset(key), runUnits, stream)) {
                continue;
            }
            lowest = i;
        }
        return lowest < 0 ? -1 : removeAt(k, lowest);
    }

    private void pushLocked(int order, long key) {
        long[] list = lists[order];
        if (sizes[order] == list.length) {
            list = lists[order] = Arrays.copyOf(list, list.length * 2);
        }
        list[sizes[order]++] = key;
        counts.lazySet(order, sizes[order]);
    }

    /** Merges every order (before growing, on trim and recovery). */
    void coalesceAll() {
        coalesce(0, true);
    }

    /** Merges order {@code k} and, while they pass their triggers (or always when forced), the orders above. */
    private void coalesce(int k, boolean force) {
        if (k >= top) {
            return;
        }
        locks[k].lock();
        while (true) {
            try {
                locks[k + 1].lock();
                try {
                    mergeOrder(k);
                } catch (RuntimeException | Error e) {
                    locks[k + 1].unlock();                         // a failed merge leaves no lock held
                    throw e;
                }
            } finally {
                locks[k].unlock();
            }
            k++;
            if (k >= top || !(force || sizes[k] > triggers[k])) {
                locks[k].unlock();
                return;
            }
        }
    }

    /** Step 2 and 3 of a merge; caller holds locks k and k + 1. */
    private void mergeOrder(int k) {
        long[] list = lists[k];
        int n = sizes[k];
        Arrays.sort(list, 0, n);
        long bit = 1L << k;
        int kept = 0;
        for (int i = 0; i < n; i++) {
            long key = list[i];
            if ((key & bit) == 0 && i + 1 < n && list[i + 1] == (key ^ bit)) {
                chunks.get(keyChunk(key)).freeStamps.merge(keyOffset(key), k);
                pushLocked(k + 1, key);
                coalesces.increment();
                i++;
            } else {
                list[kept++] = key;
            }
        }
        sizes[k] = kept;
        counts.lazySet(k, kept);
        triggers[k] = kept + threshold;
    }

    /**
     * Takes every free block of {@code chunk} out of the lists if the chunk is entirely free.
     *
     * @return true if the chunk was empty and is now detached (the caller returns it to the source)
     */
    boolean detachIfEmpty(Chunk chunk) {
        lockAll();
        try {
            if (chunk.liveUnits.get() != 0) {
                return false;
            }
            long found = 0;
            for (int k = 0; k <= top; k++) {
                long[] list = lists[k];
                int kept = 0;
                for (int i = 0; i < sizes[k]; i++) {
                    if (keyChunk(list[i]) == chunk.id) {
                        found += 1L << k;
                    } else {
                        list[kept++] = list[i];
                    }
                }
                sizes[k] = kept;
                counts.lazySet(k, kept);
                triggers[k] = Math.min(triggers[k], kept + threshold);
            }
            if (found != chunk.units) {
                throw new IllegalStateException("buddy accounting broken: chunk " + chunk.id + " has " + chunk.units
                        + " units but " + found + " were free");
            }
            chunk.liveUnits.set(Long.MIN_VALUE / 2);  // poisoned: never empty again
            return true;
        } finally {
            unlockAll();
        }
    }

    /**
     * Takes the free blocks {@code chooser} picks out of the lists, offered largest order first and
     * within an order from the last key of its arrangement down, until it is satisfied (the reclaim of
     * MAPPED growth: {@link ReclaimChoice}). The blocks count as live until the caller gives them back
     * with {@link #free}, so no allocation can hand out a unit while it is being unmapped. Holds every
     * order lock.
     *
     * @return handles of the taken blocks (runs of 2^k units), in a list sized to what was taken
     */
    long[] takeFree(FreeBlockChooser chooser) {
        long[] taken = new long[8];
        int count = 0;
        lockAll();
        try {
            for (int k = top; k >= 0 && !chooser.satisfied(); k--) {
                long[] list = lists[k];
                int n = sizes[k];
                chooser.arrange(list, n, k);
                for (int i = n - 1; i >= 0 && !chooser.satisfied(); i--) {
                    long key = list[i];
                    if (!chooser.take(key, k)) {
                        continue;
                    }
                    list[i] = list[--n];                            // list[n] was visited already (descending)
                    chunks.get(keyChunk(key)).liveUnits.addAndGet(1L << k);
                    if (count == taken.length) {
                        taken = Arrays.copyOf(taken, count * 2);
                    }
                    taken[count++] = Handles.run(keyChunk(key), keyOffset(key), 1L << k);
                }
                sizes[k] = n;
                counts.lazySet(k, n);
                triggers[k] = Math.min(triggers[k], n + threshold);
            }
        } finally {
            unlockAll();
        }
        return Arrays.copyOf(taken, count);
    }

    /** Takes every order lock, ascending (as a merge takes two); if one throws, those taken are given back. */
    private void lockAll() {
        int k = 0;
        try {
            for (; k <= top; k++) {
                locks[k].lock();
            }
        } finally {
            while (k <= top && --k >= 0) {                         // k <= top: lock k threw
                locks[k].unlock();
            }
        }
    }

    private void unlockAll() {
        for (int k = top; k >= 0; k--) {
            locks[k].unlock();
        }
    }

    /** Copies the free blocks as (chunkId, offset, order) triples; for tests and leak reports. */
    long[][] snapshotFree() {
        long[][] result = new long[top + 1][];
        for (int k = 0; k <= top; k++) {
            locks[k].lock();
            try {
                result[k] = Arrays.copyOf(lists[k], sizes[k]);
            } finally {
                locks[k].unlock();
            }
        }
        return result;
    }

    /** Free blocks of order {@code k} on a racy read (may include a slot just vacated); pairs with {@link #freeKeyUnlocked}. */
    int freeSlotsUnlocked(int k) {
        return Math.min(sizes[k], lists[k].length);
    }

    /** The key in slot {@code i} of order {@code k}, read without the lock: a hint, confirmed by {@link #take}. */
    long freeKeyUnlocked(int k, int i) {
        long[] list = lists[k];
        return i < list.length ? list[i] : -1;
    }

    /**
     * The free keys of order {@code k} ({@code (chunkId << 24) | offset}), copied without the order
     * lock: for the operators' block layout only ({@link BlockLayouts}), a racy picture that may mix
     * two moments, never used for a decision.
     */
    long[] freeKeysUnlocked(int k) {
        long[] list = lists[k];
        return Arrays.copyOf(list, Math.max(0, Math.min(sizes[k], list.length)));
    }

    static int ceilLog2(long n) {
        return n <= 1 ? 0 : 64 - Long.numberOfLeadingZeros(n - 1);
    }
}
