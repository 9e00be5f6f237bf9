package io.gpupool.model.bert;

import io.gpupool.model.BatchableModel.Member;
import io.gpupool.model.ExecutionContext;
import io.gpupool.model.HostTensor;
import io.gpupool.model.PaddedBatchPadding;
import io.gpupool.model.ShapePadding.Shape;

import java.util.List;

/**
 * Padding for padded-layout batches (the batch form of {@link BertPadding}): a batch of N = Σ Bᵣ sequences, the
 * longest S*, runs as the padded forward of [N', S'] ≥ [N, S*], a graph's request bucket, and each member gets what
 * the eager [N, S*] batch gives it. That forward is a request's: the same plan ({@link BertModel#forward}), sizes,
 * uploads and downloads, so the batch replays the graph of a request of that bucket and the other way round.
 *
 * <p>Notation as in {@link BertBatching}: member r carries Bᵣ sequences of Sᵣ tokens; primes for the bucket.
 * <pre>
 *              Sᵣ        S*        S'           ids, types: padding 0 (a valid id)
 *   r0 rows  [ real     | 0 0 0 | 0 0 ]         mask: the member's own (all ones where it sent none) over its
 *   r1 rows  [ real          | 0 | 0 ]                Sᵣ tokens, 0 past them
 *   ...
 *   N .. N'-1 [ 1 0 0 0 0 0 0 0 0 0 ]           padding rows: one unmasked token, so their softmax is defined;
 *                                                      their outputs are dropped
 * </pre>
 * Why no member sees the padding:
 * <ol>
 *   <li>attention: masked keys get no weight, so a real token attends to its own row's real tokens at any width;
 *       a padding row is a sequence of its own that no member's row attends to;</li>
 *   <li>every other encoder op computes each token row from that row alone;</li>
 *   <li>pooling: CLS reads column 0 of the member's own row; mean pooling weighs by the mask;</li>
 *   <li>outputs: member r's rows are sliced out at their row offset, its first Sᵣ columns of each token output.</li>
 * </ol>
 * Where a member's mask hides every token of a sequence, its softmax spreads over every column, so widening changes
 * it: such a batch has no shape ({@link #shapeOf} null) and runs eagerly, as {@link BertPadding} leaves such a
 * request unpadded. The forward always takes a mask (the bucket's padding needs one, and a request's padded inputs
 * always have one); token types where some member sent them.
 */
final class PaddedLayoutPadding implements PaddedBatchPadding {

    private final BertBatching batching;

    PaddedLayoutPadding(BertBatching batching) {
        this.batching = batching;
    }

    @Override
    public Shape shapeOf(List<? extends Member> members) {
        int rows = 0;
        int longest = 0;
        for (Member member : members) {
            if (((BertBatching.Sequences) member).maskedRow()) {
                return null;
            }
            rows = Math.addExact(rows, member.rows());
            longest = Math.max(longest, member.sequenceLength());
        }
        return rows == 0 ? null : new Shape(rows, longest);
    }

    @Override
    public boolean fits(Shape padded) {
        return batching.fitsPadded(padded.batch(), padded.sequence());
    }

    @Override
    public List<String> inputs(List<? extends Member> members) {
        return BertBatching.inputNames(members, true);
    }

    @Override
    public List<String> outputs(List<? extends Member> members) {
        return batching.outputNames(members);
    }

    @Override
    public List<List<HostTensor>> inferPadded(List<? extends Member> members, Shape padded, ExecutionContext context) {
        return batching.runPaddedAt(members, padded, context);
    }
}
