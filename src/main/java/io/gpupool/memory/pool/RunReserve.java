package io.gpupool.memory.pool;

import java.util.function.LongConsumer;

/**
 * One stream's reserve for runs whose size changes from request to request (a request arena, one block per
 * forward): a free run kept whole by the stream's {@link LocalCache}, from which a smaller request is carved and
 * into which the carved run merges again when it is freed.
 *
 * <h2>Why</h2>
 * A stream runs one forward at a time, and with request arenas each forward takes one run of its own size. The
 * class stacks of a local cache serve only a run of exactly the size asked, so with sizes that vary over two
 * orders of magnitude they rarely hit, and a cache that held one run per size seen would strand memory. A
 * stream that keeps one run as large as its recent requests serves most of them locally, and costs little at
 * the pool's peak: the peak is when the streams run large requests, which use their reserves whole.
 *
 * <h2>Notation and picture</h2>
 * <pre>
 *   u        unit (minimum block); R = [o, o + L) the reserve, n the units asked
 *   recent   the most units this stream's run misses asked over the last {@value #WINDOW} to 2 x {@value #WINDOW}
 *            of them (two windows of {@value #WINDOW}); keep = max(n, recent)
 *
 *   reserve        |&lt;---------------------- L -----------------------&gt;|        whole, free, mapped
 *   take(n)        |&lt;------ n: handed out ------&gt;|&lt;- remainder -&gt;|  tail  |   tail = [o + keep, o + L)
 *                  o                           o + n            o + keep  o + L goes to the global level
 *   give [o, o+n)  |&lt;------------------- keep -------------------&gt;|               merged: the reserve again
 * </pre>
 * The state is two run handles ({@link Handles#run}; 0 = none) and four counters in one padded array, like
 * the cache's own (see {@link LocalCache}, "Layout"): | pad | reserve | remainder | window max | previous max |
 * window left | last use | pad |.
 *
 * <h2>Steps (the caller holds the cache's owner word)</h2>
 * <ol>
 *   <li>take(n), on a miss of the class stacks: note n in the window. A reserve of at least n units: hand out
 *       [o, o + n), keep [o + n, o + keep) as the remainder, give [o + keep, o + L) to the global level when it
 *       is more than an eighth of keep (a stream whose requests shrank lets go of what they no longer use).
 *       A reserve of fewer units: it goes to the global level (where it can merge with free neighbours for the
 *       larger run the caller now takes there), and take answers 0. But a large run (n above the reserve's own bound,
 *       step 2) comes only from large chunks (BuddyLevel, "Large and small chunks"), which the reserve's small-chunk
 *       units cannot join, and it will not stay as a reserve after it: there the reserve stays, as it is, for the
 *       stream's next request (a request arena, usually smaller again). The window notes large runs too, so a
 *       stream whose large requests recur within it keeps its reserve whole rather than cutting it down to the
 *       smaller requests in between (the next large one would find the cut part gone).</li>
 *   <li>give(h): a run h that ends where the remainder begins merges with it. Then, with no reserve, the run
 *       becomes the reserve; with a reserve, the larger of the two stays and the other goes to the global
 *       level. A run above the limit is refused and the caller frees it. The limit is the lower of the bytes the
 *       cache passes (its configured bytes per stream; 0 for a run other than the one the stream took last) and
 *       the reserve's own bound (under MAPPED growth a run below the large-run size, whose chunks unmap whole
 *       extents only; without virtual memory 0).</li>
 *   <li>flush: reserve and remainder go to the global level (trim, recovery, retire, idle).</li>
 * </ol>
 * A run the reserve hands out or keeps is any stretch of units of one chunk: the buddy level frees such a run
 * as the aligned blocks it decomposes into, and every unit of it stayed mapped while it was in the cache.
 */
final class RunReserve {

    /** Run misses per window of the recent maximum. */
    static final int WINDOW = 8;

    /** Padding at each end of the state, in longs (two cache lines, as {@link LocalCache} pads its arrays). */
    private static final int PAD = 16;
    private static final int RESERVE = PAD;
    private static final int REMAINDER = PAD + 1;
    private static final int WINDOW_MAX = PAD + 2;
    private static final int PREVIOUS_MAX = PAD + 3;
    private static final int WINDOW_LEFT = PAD + 4;
    private static final int LAST_USE = PAD + 5;

    private final long[] state = new long[PAD + 6 + PAD];
    private final int unitShift;
    /** The most units a reserve keeps (under MAPPED growth, a run below the large-run size; else 0: none). */
    private final long maxUnits;
    /** Where a run the reserve gives up goes: the global level, under a fence of the stream. */
    private final LongConsumer giveBack;

    RunReserve(int unitShift, long maxUnits, LongConsumer giveBack) {
        this.unitShift = unitShift;
        this.maxUnits = maxUnits;
        this.giveBack = giveBack;
        state[WINDOW_LEFT] = WINDOW;
    }

    /** Bytes held (reserve and remainder). */
    long bytes() {
        return (Handles.length(state[RESERVE]) + Handles.length(state[REMAINDER])) << unitShift;
    }

    /** Runs held (0, 1 or 2). */
    int blocks() {
        return (state[RESERVE] != 0 ? 1 : 0) + (state[REMAINDER] != 0 ? 1 : 0);
    }

    /** Whether a run is out of the reserve whose remainder waits for it (one plain read: the push hot path). */
    boolean carvedOut() {
        return state[REMAINDER] != 0;
    }

    /** When the reserve was last taken from or given to ({@link CoarseClock} nanos). */
    long lastUse() {
        return state[LAST_USE];
    }

    /**
     * Step 1: a run of {@code units} carved from the reserve, or 0 when the reserve is smaller (or empty).
     * Runs given up on the way go to the global level, except the reserve itself when {@code units} is a large run
     * (see the class comment) and the reserve is still within {@code configuredBytes}, the cache's bytes per stream.
     */
    long take(int units, long configuredBytes, long now) {
        long windowMax = Math.max(state[WINDOW_MAX], units);
        long recent = Math.max(windowMax, state[PREVIOUS_MAX]);
        if (--state[WINDOW_LEFT] <= 0) {
            state[PREVIOUS_MAX] = windowMax;
            windowMax = 0;
            state[WINDOW_LEFT] = WINDOW;
        }
        state[WINDOW_MAX] = windowMax;
        long reserve = state[RESERVE];
        if (reserve == 0) {
            return 0;
        }
        long length = Handles.length(reserve);
        if (length < units && units > maxUnits && length <= limitUnits(configuredBytes)) {
            return 0;                                    // a large run: the reserve stays, unused (no new last use)
        }
        state[RESERVE] = 0;
        state[LAST_USE] = now;
        if (length < units) {
            giveBack.accept(reserve);                    // too small: the global level may merge it
            return 0;
        }
        int chunk = Handles.chunkId(reserve);
        long offset = Handles.offset(reserve);
        long keep = Math.max(units, Math.min(length, recent));
        if (length - keep > keep >>> 3) {
            giveBack.accept(Handles.run(chunk, offset + keep, length - keep));   // requests shrank
        } else {
            keep = length;
        }
        if (state[REMAINDER] != 0) {
            giveBack.accept(state[REMAINDER]);           // an older carve's remainder nobody merged
        }
        state[REMAINDER] = keep > units ? Handles.run(chunk, offset + units, keep - units) : 0;
        return Handles.run(chunk, offset, units);
    }

    /**
     * Step 2: keeps run {@code handle}, merged with the remainder when it ends where the remainder begins.
     *
     * @param configuredBytes the most a reserve may hold by the configuration (0: this run may not stay)
     * @return false when the run is above what the reserve may hold and no merge took it (the caller frees it)
     */
    boolean give(long handle, long configuredBytes, long now) {
        long remainder = state[REMAINDER];
        long run = handle;
        if (remainder != 0 && Handles.chunkId(remainder) == Handles.chunkId(handle)
                && Handles.offset(remainder) == Handles.offset(handle) + Handles.length(handle)) {
            run = Handles.run(Handles.chunkId(handle), Handles.offset(handle),
                    Handles.length(handle) + Handles.length(remainder));
            state[REMAINDER] = 0;
        } else if (Handles.length(handle) > limitUnits(configuredBytes)) {
            return false;                                          // limit 0: the caller does not let it stay
        }
        state[LAST_USE] = now;
        long reserve = state[RESERVE];
        if (reserve == 0) {
            state[RESERVE] = run;
        } else if (Handles.length(run) > Handles.length(reserve)) {
            state[RESERVE] = run;
            giveBack.accept(reserve);
        } else {
            giveBack.accept(run);
        }
        return true;
    }

    /** The most units the reserve may hold: the lower of the configured bytes and its own bound. */
    private long limitUnits(long configuredBytes) {
        return Math.min(configuredBytes >>> unitShift, maxUnits);
    }

    /** Step 3: everything held goes to the global level. @return the bytes that went */
    long flush() {
        long bytes = bytes();
        if (state[RESERVE] != 0) {
            giveBack.accept(state[RESERVE]);
            state[RESERVE] = 0;
        }
        if (state[REMAINDER] != 0) {
            giveBack.accept(state[REMAINDER]);
            state[REMAINDER] = 0;
        }
        return bytes;
    }

    /** The runs held, for the operators' block layout (a racy read). */
    void forEachRun(LongConsumer action) {
        long reserve = state[RESERVE];
        long remainder = state[REMAINDER];
        if (reserve != 0) {
            action.accept(reserve);
        }
        if (remainder != 0) {
            action.accept(remainder);
        }
    }
}
