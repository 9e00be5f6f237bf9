package io.gpupool.model.graph;

import io.gpupool.model.BatchPadding;

import java.util.Arrays;
import java.util.List;

/**
 * The shapes graphs are captured for, so that a workload of many shapes hits a handful of graphs. A request's
 * batch and sequence length round up to the next bucket; a packed batch of requests (dynamic batching) rounds its
 * total tokens up to the next token bucket and its sequences up to the next power of two; a padded-layout batch
 * [rows, longest sequence] is a request of that shape and rounds as one (its rows bounded by the model's cells
 * rather than its largest batch: GraphedModel.Batchable). A shape beyond the largest bucket (or a request whose
 * bucket exceeds the model's limits) has no bucket and runs eagerly.
 *
 * <pre>
 *   requests:  sequence buckets 16 32 64 128:   seq 1..16 -> 16,  17..32 -> 32, ...,  > 128 -> none
 *              batch buckets    1 2 4:          batch 3 -> 4, ...,  > 4 -> none
 *   packed batches (N sequences, T tokens in all):
 *              token buckets    16 24 32 48 64 96 ... 1024 1536 2048:   T 500 -> 512, 513 -> 768, > 2048 -> none
 *              sequences        N -> the next power of two, at most the token bucket:   N 19 -> 32, T 700 -> 768
 * </pre>
 * Rounding costs padded work and saves one graph per distinct shape. The two numbers of a packed batch are
 * rounded differently because they cost differently:
 * <ol>
 *   <li>tokens set the size of every product and row-wise op of the forward, so their ladder is fine: powers of
 *       two and the midpoints 1.5·2ᵏ (the default), at most 1.5× the work (powers of two alone: 2×);</li>
 *   <li>a padding sequence is empty (model/bert/PackedPadding): its attention blocks find no query and its pooled
 *       row costs one row of the pooler, so sequences take the coarse ladder of powers of two, which keeps the
 *       graphs per token bucket to a few. N ≤ T ≤ the token bucket, so capping at it leaves every N a bucket;</li>
 *   <li>the largest token bucket is where graphs stop paying: a graph saves the host's launch work, about the same
 *       for every size, while the device's work grows with the tokens; past it a batch's capture and memory
 *       cost remain and its share saved is small (docs/benchmarks.md, "Graph buckets: short shapes only", for
 *       requests). An empty ladder turns graphs of batches off.</li>
 * </ol>
 */
public final class ShapeBuckets {

    private final int[] batches;
    private final int[] sequences;
    private final int[] tokens;

    /** Buckets for requests (and padded-layout batches) only: packed batches always run eagerly. */
    public ShapeBuckets(List<Integer> batches, List<Integer> sequences) {
        this(batches, sequences, List.of());
    }

    /**
     * @param batches   batch buckets, ascending, each at least 1
     * @param sequences sequence buckets, ascending, each at least 1
     * @param tokens    token buckets of packed batches, ascending, each at least 1; empty: batches run eagerly
     */
    public ShapeBuckets(List<Integer> batches, List<Integer> sequences, List<Integer> tokens) {
        this.batches = ascending("batch-buckets", batches, false);
        this.sequences = ascending("sequence-buckets", sequences, false);
        this.tokens = ascending("token-buckets", tokens, true);
    }

    private static int[] ascending(String field, List<Integer> values, boolean mayBeEmpty) {
        if (values.isEmpty() && !mayBeEmpty) {
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

    /**
     * The bucket of a packed batch of {@code shape}: its tokens rounded up to the next token bucket, its sequences to
     * the next power of two but at most that many tokens; null when its tokens exceed the largest token bucket (or
     * it is not a batch: no sequence, or fewer tokens than sequences).
     */
    public BatchPadding.Shape packedBucket(BatchPadding.Shape shape) {
        if (shape.sequences() < 1 || shape.tokens() < shape.sequences()) {
            return null;
        }
        int tokenBucket = roundUp(tokens, shape.tokens(), Integer.MAX_VALUE);
        if (tokenBucket == 0) {
            return null;
        }
        int n = shape.sequences();
        long powerOfTwo = n == 1 ? 1 : Long.highestOneBit(n - 1L) << 1;
        return new BatchPadding.Shape((int) Math.min(powerOfTwo, tokenBucket), tokenBucket);
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
        return "batch " + Arrays.toString(batches) + ", sequence " + Arrays.toString(sequences) + ", packed tokens "
                + Arrays.toString(tokens);
    }
}
