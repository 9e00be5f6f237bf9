package io.gpupool.memory.pool;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;

/**
 * How recently the memory of each free block of one address-space chunk was freed: the input of the
 * reclaim order {@link io.gpupool.memory.ReclaimOrder#COLDEST_IN_ORDER} ({@link ReclaimChoice}).
 *
 * <h2>What a stamp means</h2>
 * A free of a run takes the next value t of the buddy level's counter ({@link Clock}): every unit of the run was freed
 * at t. The stamp of a free block is the newest free time among its units (0: never freed since the
 * chunk was reserved). Blocks merge and split, so one number per block would lose what a merged block's
 * halves held; a record per node of the chunk's buddy tree keeps it.
 *
 * <h2>Records</h2>
 * One long per node (order k, offset o, in units), at {@code [k * units + o]}:
 * <pre>
 *   record = stamp &lt;&lt; 1 | merged
 *     merged 0 (whole):  every unit of the block holds this stamp; records below it are stale
 *     merged 1:          merged from its two halves, whose records at order k - 1 are valid;
 *                        the stamp is the newer of theirs
 *
 *   order 2  [ 9 m ]                          a free block of 4 units, stamp 9 (merged)
 *   order 1  [ 9 w ][ 4 m ]                   left half freed whole at 9, right half merged
 *   order 0          [ 4 w ][ 2 w ]           an allocation that splits it: left half 9, then 4 and 2
 * </pre>
 *
 * <h2>Steps (called by {@link BuddyLevel})</h2>
 * <ol>
 *   <li>Free a run at t ({@link #stampRange}): each aligned piece the buddy level pushes gets a whole
 *       record t. As many writes as pushes.</li>
 *   <li>Merge the buddies (o, k) and (o + 2^k, k) ({@link #merge}): record (o, k + 1) becomes merged
 *       with the newer stamp; the halves' records stay. O(1).</li>
 *   <li>Split or trim a block (o, j) taken out of the lists ({@link #resolveSplit}, {@link #resolveRange}):
 *       for each piece (p, q) pushed back, walk from (o, j) towards it; the first whole record on the
 *       way gives the piece a whole record with its stamp; reached through merged records only, the
 *       piece's own record is already right. O(j - q) per piece, on the allocation path only.</li>
 * </ol>
 * <h2>Locking</h2>
 * A block's records belong to whoever holds the block: the free list it lies in (its order lock) or
 * the thread that took it out or frees it. They are written before the push that publishes the block
 * and read after the pop (or under every order lock, {@link BuddyLevel#takeFree}), so the order
 * locks order every access; this class has no lock of its own.
 */
final class FreeStamps {

    /**
     * The buddy level's free counter, one for all its chunks. Advanced with an opaque load and store, not an atomic
     * increment (a locked instruction on every free): two frees racing on two threads may take the same value, and
     * a thread descheduled between its load and its store sets the counter back by the frees that passed it
     * meanwhile, so later frees may be stamped as older than they are. The stamps only order the coldest-first
     * reclaim (a choice of which free memory to give back first), never whether memory is free or safe to use, so
     * an inexact order costs at worst a less cold choice.
     */
    static final class Clock {
        private static final VarHandle TIME;

        static {
            try {
                TIME = MethodHandles.lookup().findVarHandle(Clock.class, "time", long.class);
            } catch (ReflectiveOperationException e) {
                throw new ExceptionInInitializerError(e);
            }
        }

        @SuppressWarnings("unused") // accessed through TIME
        private long time;

        long next() {
            long next = (long) TIME.getOpaque(this) + 1;
            TIME.setOpaque(this, next);
            return next;
        }
    }

    /** The records of a chunk that is memory throughout: no stamps kept, every stamp reads 0. */
    static final FreeStamps NONE = new FreeStamps(0);

    private final int units;
    private final long[] records;

    /** Records for a chunk of {@code units} units: every order up to the largest block that fits. */
    FreeStamps(long units) {
        this.units = (int) units;
        int orders = 64 - Long.numberOfLeadingZeros(units);
        this.records = new long[orders * this.units];
    }

    /** The stamp of the free block of order {@code k} at {@code offset}. */
    long stamp(long offset, int k) {
        return this == NONE ? 0 : records[index(k, offset)] >>> 1;
    }

    /** Step 1: a run [from, to) freed now (the next value of {@code clock}), pushed as the buddy level's aligned pieces. */
    void stampRange(long from, long to, int top, Clock clock) {
        if (this == NONE) {
            return;                                                // memory throughout: not even the clock moves
        }
        long stamp = clock.next();
        for (long p = from; p < to; p += 1L << pieceOrder(p, to, top)) {
            records[index(pieceOrder(p, to, top), p)] = stamp << 1;
        }
    }

    /** Step 2: the buddies of order {@code k} at {@code lower} and {@code lower + 2^k} merged. */
    void merge(long lower, int k) {
        if (this == NONE) {
            return;
        }
        long newer = Math.max(records[index(k, lower)], records[index(k, lower + (1L << k))]) >>> 1;
        records[index(k + 1, lower)] = newer << 1 | 1;
    }

    /**
     * Step 3 for an allocation's split and trim of block (root, j): the upper halves of orders
     * j - 1 .. k, then the tail [root + units, root + 2^k).
     */
    void resolveSplit(long root, int j, int k, long units, int top) {
        if (this == NONE) {
            return;
        }
        for (int i = j - 1; i >= k; i--) {
            resolve(root, j, root + (1L << i), i);
        }
        resolveRange(root, j, root + units, root + (1L << k), top);
    }

    /** Step 3 for the pieces of [from, to) pushed back from block (root, rootOrder). */
    void resolveRange(long root, int rootOrder, long from, long to, int top) {
        if (this == NONE) {
            return;
        }
        for (long p = from; p < to; p += 1L << pieceOrder(p, to, top)) {
            resolve(root, rootOrder, p, pieceOrder(p, to, top));
        }
    }

    private void resolve(long root, int rootOrder, long piece, int order) {
        long node = root;
        for (int m = rootOrder; m > order; m--) {
            long record = records[index(m, node)];
            if ((record & 1) == 0) {
                records[index(order, piece)] = record;           // whole: the piece's units hold this stamp
                return;
            }
            if (piece >= node + (1L << (m - 1))) {
                node += 1L << (m - 1);                             // merged: into the half that holds the piece
            }
        }
    }

    /** The order of the aligned piece at {@code p} that the buddy level pushes for a range ending at {@code to}. */
    static int pieceOrder(long p, long to, int top) {
        int fits = 63 - Long.numberOfLeadingZeros(to - p);      // the largest 2^k <= to - p (p < to)
        return Math.min(Math.min(Long.numberOfTrailingZeros(p), top), fits);
    }

    private int index(int k, long offset) {
        return k * units + (int) offset;
    }
}
