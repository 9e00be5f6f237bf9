package io.gpupool.model.graph;

import io.gpupool.model.plan.LifetimePacking;

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
 * The packing itself (greedy by size, never below the trace's peak) is {@link LifetimePacking}'s, the same
 * that places a request's tensors in its arena.
 */
public final class GraphMemoryLayout {

    /** Every offset and size is a multiple of this, as every allocator in the server aligns. */
    public static final long ALIGNMENT = LifetimePacking.ALIGNMENT;

    private final LifetimePacking packing;

    private GraphMemoryLayout(LifetimePacking packing) {
        this.packing = packing;
    }

    /** Rounds {@code bytes} up to {@link #ALIGNMENT}. */
    public static long aligned(long bytes) {
        return LifetimePacking.aligned(bytes);
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
        for (int i = 0; i < n; i++) {
            if (sizes[i] <= 0) {
                throw new IllegalArgumentException("allocation " + i + " has size " + sizes[i] + ", expected > 0");
            }
            if (deaths[i] <= births[i]) {
                throw new IllegalArgumentException("allocation " + i + " dies at event " + deaths[i]
                        + ", not after its birth at " + births[i]);
            }
        }
        return new GraphMemoryLayout(LifetimePacking.pack(sizes, births, deaths));
    }

    /** Number of allocations. */
    public int count() {
        return packing.count();
    }

    /** Rounded size of allocation {@code i}. */
    public long size(int i) {
        return packing.size(i);
    }

    /** Offset of allocation {@code i} from the start of the block. */
    public long offset(int i) {
        return packing.offset(i);
    }

    /** Bytes the block must have. */
    public long blockBytes() {
        return packing.blockBytes();
    }
}
