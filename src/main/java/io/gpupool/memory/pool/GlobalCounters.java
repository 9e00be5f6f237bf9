package io.gpupool.memory.pool;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;

/**
 * The counters of the global path (blocks the global level hands out and takes back, their bytes and requested
 * bytes, and its hits), in cells striped by stream ordinal, each updated under a claim of its own.
 *
 * <pre>
 *   cell = stream ordinal &amp; (CELLS - 1)        one long[] of CELLS x STRIDE; P = LocalCache.PAD longs of padding
 *   | P pad | claim | allocations | alloc bytes | alloc requested | frees | free bytes | free requested | hits |
 *     unsampled | ... next cell (STRIDE = 16 longs = 128 bytes apart) ... | P pad |
 *   used (long bit mask): bit i set once cell i was first updated; sums visit only those
 * </pre>
 *
 * <h2>Why cells with a claim rather than a LongAdder per counter</h2>
 * An uncontended {@code LongAdder.add} is one atomic read-modify-write, and an allocation updates three counters,
 * a free another three: six locked instructions per alloc+free pair that only count. A locked instruction costs a few
 * nanoseconds on one processor and several times that on another (the Xeon hosts of the GPU machines), so on the
 * global path they were a large part of a pair. Here an update claims its cell with one CAS (0 -&gt; 1), writes the
 * counters with opaque stores and gives the claim back with a release store (a plain store on x86): one locked
 * instruction for all of them.
 *
 * <h2>Rules</h2>
 * <ul>
 *   <li>Stripes by stream, not by thread: a stream is used by one request at a time, so its cell practically never
 *       sees two claimants; the exception is a block freed from a callback thread while the stream serves the next
 *       request, which spins briefly (and yields after a while) for the claim.</li>
 *   <li>Readers never claim: they sum opaque loads. A sum taken during an update may see its count without its bytes
 *       (a moment old, like any metric); no update is ever lost.</li>
 *   <li>{@code unsampled} is not a counter but a trigger: the bytes allocated through the cell since the allocated
 *       peak was last sampled on its behalf ({@link #allocated}).</li>
 * </ul>
 */
final class GlobalCounters {

    static final int ALLOCATIONS = 1;
    static final int ALLOC_BYTES = 2;
    static final int ALLOC_REQUESTED = 3;
    static final int FREES = 4;
    static final int FREE_BYTES = 5;
    static final int FREE_REQUESTED = 6;
    static final int HITS = 7;
    private static final int UNSAMPLED = 8;
    private static final int CLAIM = 0;

    private static final int CELLS = 64;
    private static final int STRIDE = 16;
    private static final int PAD = LocalCache.PAD;
    /** Claim attempts before a waiting updater yields its processor (the claimant may have been descheduled). */
    private static final int SPINS_BEFORE_YIELD = 64;

    private static final VarHandle LONGS = MethodHandles.arrayElementVarHandle(long[].class);
    private static final VarHandle USED;

    static {
        try {
            USED = MethodHandles.lookup().findVarHandle(GlobalCounters.class, "used", long.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    private final long[] cells = new long[PAD + CELLS * STRIDE + PAD];
    @SuppressWarnings("unused") // accessed through USED
    private volatile long used;

    /** {@link #allocated}'s {@code sampleAfter} for a caller that keeps its own trigger (a stream's local cache). */
    static final long NO_TRIGGER = Long.MAX_VALUE;

    /**
     * Counts a block of {@code size} bytes ({@code requested} asked for) handed out by the global level on stream
     * {@code ordinal}.
     *
     * @param sampleAfter the unsampled bytes beyond which the caller should sample the allocated peak, or
     *                    {@link #NO_TRIGGER}
     * @return whether the caller should sample it now (the cell's unsampled bytes restart from 0)
     */
    boolean allocated(int ordinal, long size, long requested, long sampleAfter) {
        int base = claim(ordinal);
        long[] c = cells;
        LONGS.setOpaque(c, base + ALLOCATIONS, c[base + ALLOCATIONS] + 1);
        LONGS.setOpaque(c, base + ALLOC_BYTES, c[base + ALLOC_BYTES] + size);
        LONGS.setOpaque(c, base + ALLOC_REQUESTED, c[base + ALLOC_REQUESTED] + requested);
        boolean sample = false;
        if (sampleAfter != NO_TRIGGER) {
            long unsampled = c[base + UNSAMPLED] + size;
            sample = unsampled > sampleAfter;
            c[base + UNSAMPLED] = sample ? 0 : unsampled;         // read and written only by claimants
        }
        LONGS.setRelease(c, base + CLAIM, 0L);
        return sample;
    }

    /** Counts a block of {@code size} bytes ({@code requested} asked for) given back to the global level. */
    void freed(int ordinal, long size, long requested) {
        int base = claim(ordinal);
        long[] c = cells;
        LONGS.setOpaque(c, base + FREES, c[base + FREES] + 1);
        LONGS.setOpaque(c, base + FREE_BYTES, c[base + FREE_BYTES] + size);
        LONGS.setOpaque(c, base + FREE_REQUESTED, c[base + FREE_REQUESTED] + requested);
        LONGS.setRelease(c, base + CLAIM, 0L);
    }

    /** Counts an allocation or refill the global level served without growing. */
    void hit(int ordinal) {
        int base = claim(ordinal);
        LONGS.setOpaque(cells, base + HITS, cells[base + HITS] + 1);
        LONGS.setRelease(cells, base + CLAIM, 0L);
    }

    /** The total of counter {@code counter} ({@link #ALLOCATIONS} .. {@link #HITS}) over all cells. */
    long sum(int counter) {
        long total = 0;
        for (long mask = (long) USED.getAcquire(this); mask != 0; mask &= mask - 1) {
            total += (long) LONGS.getOpaque(cells, cellBase(Long.numberOfTrailingZeros(mask)) + counter);
        }
        return total;
    }

    private static int cellBase(int cell) {
        return PAD + cell * STRIDE;
    }

    /** Claims the cell of {@code ordinal} and returns its base index; the caller releases the claim. */
    private int claim(int ordinal) {
        int cell = ordinal & (CELLS - 1);
        long bit = 1L << cell;
        if (((long) USED.getOpaque(this) & bit) == 0) {
            markUsed(bit);
        }
        int base = cellBase(cell);
        for (int spins = 0; !LONGS.weakCompareAndSetAcquire(cells, base + CLAIM, 0L, 1L); spins++) {
            if (spins < SPINS_BEFORE_YIELD) {
                Thread.onSpinWait();
            } else {
                Thread.yield();
            }
        }
        return base;
    }

    private void markUsed(long bit) {
        long mask;
        do {
            mask = (long) USED.getVolatile(this);
        } while ((mask & bit) == 0 && !USED.compareAndSet(this, mask, mask | bit));
    }
}
