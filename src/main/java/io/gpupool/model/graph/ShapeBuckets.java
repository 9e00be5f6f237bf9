package io.gpupool.model.graph;

import java.util.Arrays;
import java.util.List;

/**
 * The shapes graphs are captured for: a request's batch and sequence length round up to the next
 * bucket, so a workload of many lengths hits a handful of graphs. A request beyond the largest bucket
 * (or one whose bucket exceeds the model's limits) has no bucket and runs eagerly.
 *
 * <pre>
 *   sequence buckets 16 32 64 128 256 512:   seq 1..16 -> 16,  17..32 -> 32, ...,  > 512 -> none
 *   batch buckets    1 2 4 8 16 32:          batch 3 -> 4,  batch 9 -> 16, ...
 * </pre>
 * Rounding costs padded work (at most 2x with powers of two) and saves one graph per distinct shape.
 */
public final class ShapeBuckets {

    private final int[] batches;
    private final int[] sequences;

    /**
     * @param batches   batch buckets, ascending, each at least 1
     * @param sequences sequence buckets, ascending, each at least 1
     */
    public ShapeBuckets(List<Integer> batches, List<Integer> sequences) {
        this.batches = ascending("batch-buckets", batches);
        this.sequences = ascending("sequence-buckets", sequences);
    }

    private static int[] ascending(String field, List<Integer> values) {
        if (values.isEmpty()) {
            throw new IllegalArgumentException(field + " is empty; expected at least one size");
        }
        int[] out = new int[values.size()];
        for (int i = 0; i < out.length; i++) {
            Integer value = values.get(i);
            if (value == null || value < 1 || (i > 0 && value <= out[i - 1])) {
                throw new IllegalArgumentException(field + " = " + values + " is invalid; expected strictly "
                        + "ascending sizes, each at least 1");
            }
            out[i] = value;
        }
        return out;
    }

    /** The bucket for {@code batch}, at most {@code limit}; 0 when there is none. */
    public int batchBucket(int batch, int limit) {
        return roundUp(batches, batch, limit);
    }

    /** The bucket for {@code sequence}, at most {@code limit}; 0 when there is none. */
    public int sequenceBucket(int sequence, int limit) {
        return roundUp(sequences, sequence, limit);
    }

    private static int roundUp(int[] buckets, int value, int limit) {
        for (int bucket : buckets) {
            if (bucket >= value) {
                return bucket <= limit ? bucket : 0;
            }
        }
        return 0;
    }

    @Override
    public String toString() {
        return "batch " + Arrays.toString(batches) + ", sequence " + Arrays.toString(sequences);
    }
}
