package io.gpupool.model.graph;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.List;

/**
 * Where, inside one pool block, each allocation of a captured forward pass lives: offsets packed from
 * the allocation trace of a dry run, so that one block of {@link #blockBytes()} holds every
 * activation of the graph and tensors whose lifetimes do not overlap share bytes.
 *
 * <p>Notation: the dry run calls allocate and release in some order; event {@code e} is the
 * {@code e}-th of those calls. Allocation {@code i} has size {@code size(i)} (rounded up to
 * {@link #ALIGNMENT}), lives over the events {@code [birth(i), death(i))} (death = the release, or the
 * end of the run). Two allocations conflict when their lifetimes overlap; conflicting allocations
 * must not share a byte. A release is stream-ordered (the kernels that read a tensor were enqueued
 * before its release, later kernels run after them), so an allocation born after {@code death(i)}
 * may reuse {@code i}'s bytes, exactly as the pool would let it.
 * <pre>
 *   offset ─►  0                                              blockBytes
 *   event 0    [ ids ][ emb.sum ......... ]
 *   event 3    [ ids ]                    [ emb.out ........ ]
 *   event 5    [ ids ][ qkv ................... ]  (emb.sum's bytes reused)
 * </pre>
 * Packing, greedy by size (largest first, the order that makes small tensors fill the holes):
 * <ol>
 *   <li>sort allocations by size descending (ties: earlier birth first);</li>
 *   <li>for each, collect the placed allocations it conflicts with, sorted by offset;</li>
 *   <li>walk the gaps between them from offset 0 and take the first gap it fits in (else the end of
 *       the last one);</li>
 *   <li>{@code blockBytes} = the highest end of any placement.</li>
 * </ol>
 * The result is never below the plan's peak (the sum of sizes alive at the busiest event) and, for
 * the chain-shaped forwards of our models, equals it or comes close. O(n² log n) for n allocations:
 * a few hundred, once per captured shape.
 */
public final class GraphMemoryLayout {

    /** Every offset and size is a multiple of this, as every allocator in the server aligns. */
    public static final long ALIGNMENT = 256;

    private final long[] sizes;
    private final long[] offsets;
    private final long blockBytes;

    private GraphMemoryLayout(long[] sizes, long[] offsets, long blockBytes) {
        this.sizes = sizes;
        this.offsets = offsets;
        this.blockBytes = blockBytes;
    }

    /** Rounds {@code bytes} up to {@link #ALIGNMENT}. */
    public static long aligned(long bytes) {
        return (bytes + ALIGNMENT - 1) / ALIGNMENT * ALIGNMENT;
    }

    /**
     * Packs allocations given in the order they were made.
     *
     * @param sizes  size of allocation i (any positive byte count; rounded up here)
     * @param births event index at which allocation i was made
     * @param deaths event index at which it was released (greater than its birth)
     */
    public static GraphMemoryLayout pack(long[] sizes, int[] births, int[] deaths) {
        int n = sizes.length;
        if (births.length != n || deaths.length != n) {
            throw new IllegalArgumentException("sizes, births and deaths differ in length: " + n + ", "
                    + births.length + ", " + deaths.length);
        }
        long[] rounded = new long[n];
        for (int i = 0; i < n; i++) {
            if (sizes[i] <= 0) {
                throw new IllegalArgumentException("allocation " + i + " has size " + sizes[i] + ", expected > 0");
            }
            if (deaths[i] <= births[i]) {
                throw new IllegalArgumentException("allocation " + i + " dies at event " + deaths[i]
                        + ", not after its birth at " + births[i]);
            }
            rounded[i] = aligned(sizes[i]);
        }
        Integer[] order = new Integer[n];
        for (int i = 0; i < n; i++) {
            order[i] = i;
        }
        Arrays.sort(order, Comparator.<Integer>comparingLong(i -> -rounded[i]).thenComparingInt(i -> births[i]));
        long[] offsets = new long[n];
        boolean[] placed = new boolean[n];
        long blockBytes = 0;
        List<Integer> conflicts = new ArrayList<>();
        for (int i : order) {
            conflicts.clear();
            for (int j = 0; j < n; j++) {
                if (placed[j] && births[i] < deaths[j] && births[j] < deaths[i]) {
                    conflicts.add(j);
                }
            }
            conflicts.sort(Comparator.comparingLong(j -> offsets[j]));
            long candidate = 0;
            for (int j : conflicts) {
                if (candidate + rounded[i] <= offsets[j]) {
                    break;                                        // fits in the gap before j
                }
                candidate = Math.max(candidate, offsets[j] + rounded[j]);
            }
            offsets[i] = candidate;
            placed[i] = true;
            blockBytes = Math.max(blockBytes, candidate + rounded[i]);
        }
        return new GraphMemoryLayout(rounded, offsets, blockBytes);
    }

    /** Number of allocations. */
    public int count() {
        return sizes.length;
    }

    /** Rounded size of allocation {@code i}. */
    public long size(int i) {
        return sizes[i];
    }

    /** Offset of allocation {@code i} from the start of the block. */
    public long offset(int i) {
        return offsets[i];
    }

    /** Bytes the block must have. */
    public long blockBytes() {
        return blockBytes;
    }
}
