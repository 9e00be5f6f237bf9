package io.gpupool.memory.pool;

import io.gpupool.memory.PoolConfig;

/**
 * Size classes of the small-object cache: every request below the minimum buddy block is rounded
 * up to one of these sizes, and each class is carved from slabs (buddy runs) of its own.
 *
 * <h2>The table</h2>
 * <pre>
 *   index 0..7      256 x (i + 1)                       256, 512, ..., 2048   (alignment granule)
 *   index 8 + 8g + (j - 1),  g >= 0, j = 1..8:
 *                   2^k + j x 2^(k-3),  k = 11 + g       2304, 2560, ..., 4096, 4608, ...
 *   last class      the largest size of that form below the minimum block
 * </pre>
 * Within a power-of-two group {@code (2^k, 2^(k+1)]} the eight classes are {@code 2^(k-3)} apart,
 * so a request {@code r > 2 KiB} wastes less than {@code 2^(k-3) / 2^k = 12.5 %} of itself. Below
 * 2 KiB the 256-byte alignment granule dominates: the waste is below 256 bytes, not below 12.5 %.
 * All class sizes are multiples of 256, so objects carved from a minimum-block-aligned slab are
 * 256-byte aligned.
 *
 * <h2>Slabs</h2>
 * A slab of class {@code c} is a run of {@code n} minimum blocks, {@code n} in 1..8, chosen as the
 * smallest {@code n} whose tail ({@code n x minBlock mod size(c)}) wastes at most 1/16 of the slab,
 * or the {@code n} with the least waste if none does. (A 1.25 MiB class in one 2 MiB block would
 * waste 37.5 %; two blocks hold three objects and waste 6.25 %.)
 *
 * <p>Lookups are O(1) arithmetic ({@link #indexOf}); the table exists for metrics and slab sizing
 * and is checked against {@link #formula} by a test that walks every index.
 */
final class SizeClasses {

    static final int GRANULE = PoolConfig.ALIGNMENT;
    /** Classes per power-of-two group, as a shift: 8 classes, spacing 2^(k-3). */
    static final int LOG2_STEPS = 3;
    static final int STEPS = 1 << LOG2_STEPS;
    /** End of the linear part: classes up to 2^FIRST_GROUP_LOG2 step by GRANULE. */
    static final int FIRST_GROUP_LOG2 = 11;
    static final int MAX_SLAB_BLOCKS = 8;

    private final long minBlockBytes;
    private final long[] sizes;
    private final int[] slabBlocks;

    SizeClasses(long minBlockBytes) {
        this.minBlockBytes = minBlockBytes;
        int count = 0;
        while (formula(count) < minBlockBytes) {
            count++;
        }
        sizes = new long[count];
        slabBlocks = new int[count];
        for (int i = 0; i < count; i++) {
            sizes[i] = formula(i);
            slabBlocks[i] = chooseSlabBlocks(sizes[i], minBlockBytes);
        }
    }

    /** The class size of index {@code i} computed from the definition (no table). */
    static long formula(int index) {
        if (index < STEPS) {
            return (long) GRANULE * (index + 1);
        }
        int group = (index - STEPS) >> LOG2_STEPS;
        int step = ((index - STEPS) & (STEPS - 1)) + 1;
        int k = FIRST_GROUP_LOG2 + group;
        return (1L << k) + ((long) step << (k - LOG2_STEPS));
    }

    private static int chooseSlabBlocks(long size, long minBlock) {
        int best = 1;
        double bestWaste = 1.0;
        for (int n = 1; n <= MAX_SLAB_BLOCKS; n++) {
            long slab = n * minBlock;
            double waste = (double) (slab % size) / slab;
            if (waste <= 1.0 / 16) {
                return n;
            }
            if (waste < bestWaste) {
                bestWaste = waste;
                best = n;
            }
        }
        return best;
    }

    int count() {
        return sizes.length;
    }

    long size(int index) {
        return sizes[index];
    }

    /** Minimum blocks per slab of class {@code index}. */
    int slabBlocks(int index) {
        return slabBlocks[index];
    }

    /** Objects per slab of class {@code index}. */
    int objectsPerSlab(int index) {
        return (int) (slabBlocks[index] * minBlockBytes / sizes[index]);
    }

    /**
     * The smallest class holding {@code bytes}, or -1 when {@code bytes} exceeds the largest class
     * (the request then takes a minimum block).
     *
     * @param bytes positive
     */
    int indexOf(long bytes) {
        int index;
        if (bytes <= (1L << FIRST_GROUP_LOG2)) {
            index = (int) ((bytes + GRANULE - 1) / GRANULE) - 1;
        } else {
            int k = 63 - Long.numberOfLeadingZeros(bytes - 1);          // bytes in (2^k, 2^(k+1)]
            long spacing = 1L << (k - LOG2_STEPS);
            int step = (int) ((bytes - (1L << k) + spacing - 1) >>> (k - LOG2_STEPS)); // 1..8; a shift, not a division
            index = STEPS + ((k - FIRST_GROUP_LOG2) << LOG2_STEPS) + step - 1;
        }
        return index < sizes.length ? index : -1;
    }
}
