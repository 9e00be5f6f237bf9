package io.gpupool.model.plan;

import java.util.Arrays;

/**
 * A static placement of buffers with known lifetimes inside one block: every buffer gets an offset,
 * buffers alive at the same time never share a byte, buffers whose lifetimes are disjoint may. Used for
 * a request's arena ({@link ExecutionPlan}, one offset per tensor from the steps' liveness) and for the
 * block of a captured graph ({@code model.graph.GraphMemoryLayout}, from a dry run's allocation trace).
 *
 * <h2>Notation</h2>
 * <pre>
 *   i            a buffer, i = 0 .. n-1
 *   size(i)      its bytes, rounded up to ALIGNMENT (256); 0: the buffer takes no bytes and is not placed
 *   [from, to)   its lifetime in some clock (plan steps, trace events); half-open, from &lt; to
 *   conflict     i and j are alive at a common instant: from(i) &lt; to(j) and from(j) &lt; to(i)
 *   offset(i)    where it starts in the block, a multiple of ALIGNMENT
 *   blockBytes   max over i of offset(i) + size(i)
 *   peak         max over instants of the sum of size(i) alive then: no packing can need fewer bytes
 * </pre>
 * For a plan, a tensor written first at step s and read last at step e lives over {@code [s, e + 1)}:
 * a tensor first written at step e + 1 may take its bytes, as it may take a released block in the pool
 * (the release is stream-ordered, the later step runs after the reads).
 * <pre>
 *   a 2K steps 0-1,  b 4K steps 1-2,  c 1K steps 2-3,  d 256 B steps 0-3;  placed in the order b, a, c, d
 *
 *   offset ─►  0                4K       6K 6.25K
 *   step 0                      [ a      ][d]
 *   step 1     [ b ............ ][ a      ][d]     peak (step 1): b + a + d = 6.25K
 *   step 2     [ b ............ ][ c ]    [d]     c takes a's bytes: a is dead after step 1
 *   step 3                      [ c ]    [d]
 *                                               blockBytes = 6.25K = peak
 * </pre>
 *
 * <h2>Packing (greedy by size)</h2>
 * <ol>
 *   <li>Order the buffers of non-zero size by size, largest first (ties: earlier {@code from}, then
 *       lower index, so the result is a function of the input alone). Large buffers placed first leave
 *       holes that the many small ones fill; placed last they would scatter the large ones upward.</li>
 *   <li>For each buffer in that order, collect the placed buffers it conflicts with and sort them by
 *       offset.</li>
 *   <li>Walk them from offset 0, keeping {@code candidate} = the lowest offset not yet ruled out: the
 *       buffer fits before a conflicting one when {@code candidate + size <= offset(j)}, and then takes
 *       {@code candidate}; otherwise {@code candidate} moves past {@code j}'s end. After the last, the
 *       candidate is above every conflicting buffer.</li>
 *   <li>{@code blockBytes} = the highest end of any placement.</li>
 * </ol>
 * The result is never below the peak, and no two conflicting buffers overlap (step 3 skips every
 * conflicting placement). For the chain-shaped forwards of our models, whose tensors mostly live a step
 * or two, it meets the peak where measured (docs/benchmarks.md, "Request arenas"). Property tests hold it
 * to the conflict rule on random buffers ({@code LifetimePackingTest}) and on random plans run in arenas
 * ({@code ExecutionPlanArenaTest}). Cost: n² conflict checks for n buffers (a few hundred) and a sort of
 * each buffer's conflicts, once per shape.
 */
public final class LifetimePacking {

    /** Every offset and size is a multiple of this, as every allocator in the server aligns. */
    public static final long ALIGNMENT = 256;

    private final long[] sizes;
    private final long[] offsets;
    private final long blockBytes;

    private LifetimePacking(long[] sizes, long[] offsets, long blockBytes) {
        this.sizes = sizes;
        this.offsets = offsets;
        this.blockBytes = blockBytes;
    }

    /** Rounds {@code bytes} (&gt;= 0) up to {@link #ALIGNMENT}. */
    public static long aligned(long bytes) {
        return (bytes + ALIGNMENT - 1) / ALIGNMENT * ALIGNMENT;
    }

    /**
     * Places buffer i, of {@code sizes[i]} bytes (&gt;= 0; rounded up here), alive over
     * {@code [from[i], to[i])}.
     *
     * @throws IllegalArgumentException if the arrays differ in length, a size is negative or a lifetime is empty
     */
    public static LifetimePacking pack(long[] sizes, int[] from, int[] to) {
        int n = sizes.length;
        if (from.length != n || to.length != n) {
            throw new IllegalArgumentException("sizes, from and to differ in length: " + n + ", " + from.length
                    + ", " + to.length);
        }
        long[] rounded = new long[n];
        int placeable = 0;
        for (int i = 0; i < n; i++) {
            if (sizes[i] < 0) {
                throw new IllegalArgumentException("buffer " + i + " has size " + sizes[i] + ", expected >= 0");
            }
            if (to[i] <= from[i]) {
                throw new IllegalArgumentException("buffer " + i + " lives over [" + from[i] + ", " + to[i]
                        + "), expected from < to");
            }
            rounded[i] = aligned(sizes[i]);
            if (rounded[i] > 0) {
                placeable++;
            }
        }
        int[] order = bySizeDescending(rounded, from, placeable);
        long[] offsets = new long[n];
        int[] placed = new int[placeable];
        int placedCount = 0;
        int[] conflicts = new int[placeable];
        long blockBytes = 0;
        for (int i : order) {
            int k = 0;
            for (int p = 0; p < placedCount; p++) {
                int j = placed[p];
                if (from[i] < to[j] && from[j] < to[i]) {
                    conflicts[k++] = j;
                }
            }
            sortByOffset(conflicts, k, offsets);
            long candidate = 0;
            for (int c = 0; c < k; c++) {
                int j = conflicts[c];
                if (candidate + rounded[i] <= offsets[j]) {
                    break;                                        // fits in the gap before j
                }
                candidate = Math.max(candidate, offsets[j] + rounded[j]);
            }
            offsets[i] = candidate;
            placed[placedCount++] = i;
            blockBytes = Math.max(blockBytes, candidate + rounded[i]);
        }
        return new LifetimePacking(rounded, offsets, blockBytes);
    }

    /** The buffers of non-zero size, largest first; ties by earlier {@code from}, then lower index. */
    private static int[] bySizeDescending(long[] rounded, int[] from, int placeable) {
        Integer[] boxed = new Integer[placeable];
        int k = 0;
        for (int i = 0; i < rounded.length; i++) {
            if (rounded[i] > 0) {
                boxed[k++] = i;
            }
        }
        Arrays.sort(boxed, (x, y) -> {
            int bySize = Long.compare(rounded[y], rounded[x]);
            if (bySize != 0) {
                return bySize;
            }
            int byBirth = Integer.compare(from[x], from[y]);
            return byBirth != 0 ? byBirth : Integer.compare(x, y);
        });
        int[] order = new int[placeable];
        for (int i = 0; i < placeable; i++) {
            order[i] = boxed[i];
        }
        return order;
    }

    /** Insertion sort of {@code ids[0, count)} by offset: the lists are short and arrive almost sorted. */
    private static void sortByOffset(int[] ids, int count, long[] offsets) {
        for (int a = 1; a < count; a++) {
            int id = ids[a];
            long key = offsets[id];
            int b = a - 1;
            while (b >= 0 && offsets[ids[b]] > key) {
                ids[b + 1] = ids[b];
                b--;
            }
            ids[b + 1] = id;
        }
    }

    /** Number of buffers, placed or not. */
    public int count() {
        return sizes.length;
    }

    /** Rounded size of buffer {@code i} (0: not placed). */
    public long size(int i) {
        return sizes[i];
    }

    /** Offset of buffer {@code i} from the start of the block (0 for a buffer of size 0). */
    public long offset(int i) {
        return offsets[i];
    }

    /** Bytes the block must have. */
    public long blockBytes() {
        return blockBytes;
    }
}
