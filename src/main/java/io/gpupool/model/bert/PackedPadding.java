package io.gpupool.model.bert;

import io.gpupool.model.BatchPadding;
import io.gpupool.model.BatchableModel.Member;
import io.gpupool.model.ExecutionContext;
import io.gpupool.model.HostTensor;

import java.util.List;

/**
 * Padding for packed batches (the batch form of {@link BertPadding}): a batch of N sequences and T tokens runs as a
 * packed forward ({@link PackedBertForward}) of N' ≥ N sequences and T' ≥ T tokens, a graph's bucket, and each
 * member gets what the unpadded packed forward gives it.
 *
 * <p>Notation as in {@link PackedBertForward}: sequence i of length Lᵢ, offsets [N+1]; primes for the bucket.
 * <pre>
 *   rows      0 .. L₀-1 | L₀ .. | ... | .. T-1 | T ............ T'-1
 *             sequence 0 | 1     | ... | N-1    | tail: id, type, position 0, mask 0; in no sequence
 *   offsets   [0, L₀, L₀+L₁, ..., T, T, ..., T]     N'+1 entries: sequences N .. N'-1 are empty, at T
 * </pre>
 * Why no member sees the padding:
 * <ol>
 *   <li>attention: sequence i attends to rows offsets[i] .. offsets[i+1]-1, its own. The tail lies past
 *       offsets[N'] = T, in no sequence, so no real row attends to it, and attention writes no context for it (its
 *       rows keep what the graph's memory held);</li>
 *   <li>every other encoder op (embeddings, products, bias, activation, residual, LayerNorm) computes each row from
 *       that row alone, so a tail row never reaches a member's row, whatever it holds;</li>
 *   <li>pooling: an empty sequence pools to zeros and reads no row; the members' sequences pool their own rows;</li>
 *   <li>outputs: the members' rows come first (T token rows, N pooled rows); only those are downloaded and sliced
 *       per member as in the unpadded forward. The padding's rows are computed and dropped.</li>
 * </ol>
 * So that one graph serves every batch of its bucket, nothing the device runs may depend on the members' own
 * lengths except through memory uploaded before it runs: every size, grid and allocation of the forward comes
 * from (N', T'), which inputs are present ({@link #inputs}) and which outputs are wanted ({@link #outputs}); where
 * the sequences start and the positions in them come from the uploaded offsets and positions; the longest sequence
 * that attention is told of is a bound, min(T', max_sequence_length) (the CUDA kernel's grid is (N', heads) and
 * reads each length from the offsets; the host backend uses the bound only to decide whether to run in parallel).
 */
final class PackedPadding implements BatchPadding {

    private final BertBatching batching;

    PackedPadding(BertBatching batching) {
        this.batching = batching;
    }

    @Override
    public List<String> inputs(List<? extends Member> members) {
        return BertBatching.inputNames(members, false);
    }

    @Override
    public List<String> outputs(List<? extends Member> members) {
        return batching.outputNames(members);
    }

    @Override
    public List<List<HostTensor>> inferPadded(List<? extends Member> members, Shape padded, ExecutionContext context) {
        return batching.runPackedAt(members, padded, longestBound(padded), context);
    }

    /** The longest sequence any batch of {@code padded} can hold: what attention is told instead of the real one. */
    int longestBound(Shape padded) {
        return Math.min(padded.tokens(), batching.maxSequenceLength());
    }
}
