package io.gpupool.model.bert;

import io.gpupool.kernels.TensorOps;
import io.gpupool.kernels.host.HostTensorOps;
import io.gpupool.model.BatchPadding;
import io.gpupool.model.BatchableModel;
import io.gpupool.model.DataType;
import io.gpupool.model.HostTensor;
import io.gpupool.model.PaddedBatchPadding;
import io.gpupool.model.ShapePadding;
import io.gpupool.model.bert.BertRequests.Request;
import io.gpupool.model.mlp.MlpModel;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import java.lang.foreign.MemorySegment;
import java.util.List;
import java.util.Set;

import static io.gpupool.model.bert.BertRequests.bert;
import static io.gpupool.model.bert.BertRequests.clsBertRequests;
import static io.gpupool.model.bert.BertRequests.irisRequests;
import static io.gpupool.model.bert.BertRequests.members;
import static io.gpupool.model.bert.BertRequests.mixedBertRequests;
import static io.gpupool.model.bert.BertRequests.shortBertRequests;
import static io.gpupool.model.bert.HostModels.withoutPackedOps;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * A batch of requests (packed or padded) gives every request what it gets alone, whatever mix of lengths,
 * masks, token types and output selections; the batch's peak is the planned one; a malformed request is
 * rejected by {@code prepare} with the message a request alone gets.
 */
class BertBatchingTest {

    static final double TOLERANCE = 1e-5;

    private final HostModels models = new HostModels();

    @AfterEach
    void close() throws Exception {
        models.close();
    }

    /** Runs each request alone through infer, then all of them as one batch, and compares per request. */
    private void assertBatchEqualsAlone(BatchableModel model, TensorOps ops, List<Request> batch) {
        BertRequests.assertBatchEqualsAlone(model, () -> models.context(ops), batch, TOLERANCE);
    }

    @Test
    void packedBatchOfMixedLengthsMasksAndSelectionsEqualsEachRequestAlone() {
        HostTensorOps ops = new HostTensorOps();
        BatchableModel model = models.load("tiny-bert", ops);
        assertThat(model.batchLayout()).isEqualTo("packed");

        assertBatchEqualsAlone(model, ops, mixedBertRequests());
    }

    @Test
    void classifierAndMeanPoolingOutputsArePackedPerSequenceToo() {
        HostTensorOps ops = new HostTensorOps();
        BatchableModel model = models.load("tiny-bert-cls", ops);

        assertBatchEqualsAlone(model, ops, clsBertRequests());
    }

    @Test
    void withoutPackedKernelsTheBatchIsPaddedAndStillEqualsEachRequestAlone() {
        TensorOps ops = withoutPackedOps(new HostTensorOps());
        BatchableModel model = models.load("tiny-bert", ops);
        assertThat(model.batchLayout()).isEqualTo("padded");

        assertBatchEqualsAlone(model, ops, shortBertRequests());
    }

    @Test
    void aPaddedBatchOfShortSequencesMayHoldMoreRowsThanTheLargestBatchAndStillEqualsEachRequestAlone() {
        TensorOps ops = withoutPackedOps(new HostTensorOps());
        BatchableModel model = models.load("tiny-bert", ops);
        List<Request> twelveRows = List.of(
                bert(1, 4, 6, 2, true, false, Set.of()),
                bert(2, 3, 3, 0, false, true, Set.of(BertModel.POOLER_OUTPUT)),
                bert(3, 4, 9, 0, false, false, Set.of(BertModel.LAST_HIDDEN_STATE)),
                bert(4, 1, 2, 1, true, true, Set.of()));
        assertThat(model.fitsOneForward(members(model, twelveRows))).as("12 rows x 9 = 108 cells, within 8 x 64")
                .isTrue();

        assertBatchEqualsAlone(model, ops, twelveRows);
    }

    @Test
    void aPaddedBatchNeverHoldsMoreCellsThanTheLargestRequestAlone() {
        BatchableModel model = models.load("tiny-bert", withoutPackedOps(new HostTensorOps()));
        BatchableModel.Member largest = model.prepare(bert(1, 8, 64, 0, false, false, Set.of()).inputs(), Set.of());
        BatchableModel.Member oneToken = model.prepare(bert(2, 1, 1, 0, false, false, Set.of()).inputs(), Set.of());
        BatchableModel.Member half = model.prepare(bert(3, 4, 64, 0, false, false, Set.of()).inputs(), Set.of());

        assertThat(model.fitsOneForward(List.of(half, half))).as("8 x 64: the largest request's cells").isTrue();
        assertThat(model.fitsOneForward(List.of(largest, oneToken))).as("9 rows padded to 64 > 8 x 64").isFalse();
        assertThat(model.fitsOneForward(List.of(half, half, oneToken))).isFalse();
    }

    @Test
    void aPackedBatchPeaksAtExactlyItsPlannedBytesAndReleasesThemAll() {
        HostTensorOps ops = new HostTensorOps();
        BatchableModel model = models.load("tiny-bert", ops);
        List<BatchableModel.Member> members = members(model, mixedBertRequests());
        models.requests.resetPeak();

        model.inferBatch(members, models.context(ops));

        assertThat(models.requests.peakBytes()).isEqualTo(model.batchPeakBytes(members));
        assertThat(models.requests.currentBytes()).isZero();
        assertThat(model.batchPeakBytes(members)).as("more members plan more")
                .isGreaterThan(model.batchPeakBytes(members.subList(0, 1)));
    }

    /**
     * The host path a batch graph replays (BatchPadding.inferPadded at the bucket): padded with empty sequences, a
     * tail of tokens in no sequence (left holding the allocator's garbage by attention), or both, every request gets
     * what it gets alone.
     */
    @Test
    void aPackedBatchPaddedToABucketGivesEachRequestWhatItGetsAlone() {
        HostTensorOps ops = new HostTensorOps();
        BatchableModel model = models.load("tiny-bert", ops);
        BatchPadding padding = model.batchPadding().orElseThrow();
        BatchPadding.Shape own = BatchPadding.Shape.of(members(model, mixedBertRequests()));
        assertThat(own).as("11 sequences of 314 tokens").isEqualTo(new BatchPadding.Shape(11, 314));

        List<BatchPadding.Shape> buckets = List.of(
                new BatchPadding.Shape(16, 384),     // empty sequences and a tail
                new BatchPadding.Shape(16, 314),     // empty sequences at T, no tail (CLS reads no row for them)
                new BatchPadding.Shape(11, 320),     // a tail, no empty sequence
                own);
        for (BatchPadding.Shape bucket : buckets) {
            BertRequests.assertBatchEqualsAlone(model, (members, context) -> padding.inferPadded(members, bucket,
                    context), () -> models.context(ops), mixedBertRequests(), TOLERANCE);
        }
    }

    @Test
    void meanPoolingAndTheClassifierOfAPaddedBatchSkipItsEmptySequencesAndTail() {
        HostTensorOps ops = new HostTensorOps();
        BatchableModel model = models.load("tiny-bert-cls", ops);
        BatchPadding padding = model.batchPadding().orElseThrow();
        BatchPadding.Shape bucket = new BatchPadding.Shape(8, 64);   // own: 6 sequences of 46 tokens

        BertRequests.assertBatchEqualsAlone(model, (members, context) -> padding.inferPadded(members, bucket, context),
                () -> models.context(ops), clsBertRequests(), TOLERANCE);
    }

    @Test
    void aPaddedBatchNamesTheInputsAndOutputsItsForwardTakesAndRefusesABucketTooSmall() {
        HostTensorOps ops = new HostTensorOps();
        BatchableModel model = models.load("tiny-bert", ops);
        BatchPadding padding = model.batchPadding().orElseThrow();
        List<BatchableModel.Member> idsOnly = members(model, List.of(
                bert(1, 2, 5, 0, false, false, Set.of(BertModel.POOLER_OUTPUT))));
        List<BatchableModel.Member> mixed = members(model, shortBertRequests());

        assertThat(padding.inputs(idsOnly)).containsExactly(BertModel.INPUT_IDS);
        assertThat(padding.outputs(idsOnly)).containsExactly(BertModel.POOLER_OUTPUT);
        assertThat(padding.inputs(mixed)).containsExactly(BertModel.ATTENTION_MASK, BertModel.INPUT_IDS,
                BertModel.TOKEN_TYPE_IDS);
        assertThat(padding.outputs(mixed)).as("a request selecting nothing selects every output")
                .containsExactlyElementsOf(model.outputs().stream().map(spec -> spec.name()).sorted().toList());
        assertThatThrownBy(() -> padding.inferPadded(mixed, new BatchPadding.Shape(6, 20), models.context(ops)))
                .isInstanceOf(IllegalStateException.class).hasMessageContaining("cannot run padded");
    }

    /**
     * The host path a padded-layout batch graph replays (PaddedBatchPadding.inferPadded at a request bucket): padded
     * with rows, columns or both (members with and without masks and types), every request gets what it gets alone;
     * mean pooling and the classifier too.
     */
    @Test
    void aPaddedLayoutBatchPaddedToARequestBucketGivesEachRequestWhatItGetsAlone() {
        TensorOps ops = withoutPackedOps(new HostTensorOps());
        BatchableModel model = models.load("tiny-bert", ops);
        PaddedBatchPadding padding = model.paddedBatchPadding().orElseThrow();
        ShapePadding.Shape own = padding.shapeOf(members(model, shortBertRequests()));
        assertThat(own).as("6 rows, the longest 17").isEqualTo(new ShapePadding.Shape(6, 17));

        List<ShapePadding.Shape> buckets = List.of(
                new ShapePadding.Shape(8, 32),    // padding rows and columns
                new ShapePadding.Shape(8, 17),    // padding rows only
                new ShapePadding.Shape(6, 32),    // columns only
                own);                             // none, but a mask where the eager batch has none
        for (ShapePadding.Shape bucket : buckets) {
            BertRequests.assertBatchEqualsAlone(model, (members, context) -> padding.inferPadded(members, bucket,
                    context), () -> models.context(ops), shortBertRequests(), TOLERANCE);
        }

        BatchableModel cls = models.load("tiny-bert-cls", ops);
        List<Request> meanPooled = List.of(bert(6, 2, 9, 2, true, true, Set.of()),
                bert(8, 1, 4, 1, false, false, Set.of()));
        BertRequests.assertBatchEqualsAlone(cls, (members, context) -> cls.paddedBatchPadding().orElseThrow()
                .inferPadded(members, new ShapePadding.Shape(4, 16), context), () -> models.context(ops), meanPooled,
                TOLERANCE);
    }

    @Test
    void aPaddedLayoutBatchTakesTheInputsOfAPaddedRequestHasNoShapeWithAFullyMaskedSequenceAndRefusesABadBucket() {
        TensorOps ops = withoutPackedOps(new HostTensorOps());
        BatchableModel model = models.load("tiny-bert", ops);
        assertThat(model.batchPadding()).as("no packed padding in the padded layout").isEmpty();
        PaddedBatchPadding padding = model.paddedBatchPadding().orElseThrow();
        List<BatchableModel.Member> idsOnly = members(model, List.of(
                bert(1, 2, 5, 0, false, false, Set.of(BertModel.POOLER_OUTPUT))));
        List<BatchableModel.Member> mixed = members(model, shortBertRequests());
        List<BatchableModel.Member> fullyMasked = members(model, List.of(bert(2, 2, 5, 0, true, true, Set.of()),
                bert(3, 1, 4, 4, true, false, Set.of())));

        assertThat(padding.inputs(idsOnly)).as("a padded request always has a mask")
                .containsExactly(BertModel.ATTENTION_MASK, BertModel.INPUT_IDS);
        assertThat(padding.outputs(idsOnly)).containsExactly(BertModel.POOLER_OUTPUT);
        assertThat(padding.inputs(mixed)).containsExactly(BertModel.ATTENTION_MASK, BertModel.INPUT_IDS,
                BertModel.TOKEN_TYPE_IDS);
        assertThat(padding.shapeOf(fullyMasked)).as("widening would change its softmax").isNull();
        assertThat(padding.fits(new ShapePadding.Shape(8, 64))).as("the largest request's cells").isTrue();
        assertThat(padding.fits(new ShapePadding.Shape(16, 32))).as("more rows than the largest batch, as many cells")
                .isTrue();
        assertThat(padding.fits(new ShapePadding.Shape(16, 64))).isFalse();
        for (ShapePadding.Shape bad : List.of(new ShapePadding.Shape(5, 32), new ShapePadding.Shape(8, 16),
                new ShapePadding.Shape(32, 32))) {
            assertThatThrownBy(() -> padding.inferPadded(mixed, bad, models.context(ops)))
                    .isInstanceOf(IllegalStateException.class).hasMessageContaining("cannot run padded");
        }
        assertThat(models.requests.currentBytes()).as("a refused bucket takes no activations").isZero();
    }

    @Test
    void packedBatchesHaveNoRequestShapedPadding() {
        BatchableModel model = models.load("tiny-bert", new HostTensorOps());

        assertThat(model.paddedBatchPadding()).isEmpty();
    }

    @Test
    void prepareRejectsWhatInferRejectsWithTheSameMessage() {
        HostTensorOps ops = new HostTensorOps();
        BatchableModel model = models.load("tiny-bert", ops);
        long[] ids = {2, 100, 3};
        List<HostTensor> outOfVocabulary = List.of(new HostTensor(BertModel.INPUT_IDS, DataType.INT64, new long[]{1, 3},
                MemorySegment.ofArray(ids)));

        Throwable alone = org.assertj.core.api.Assertions.catchThrowable(
                () -> model.infer(outOfVocabulary, Set.of(), models.context(ops)));
        assertThat(alone).isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> model.prepare(outOfVocabulary, Set.of()))
                .isInstanceOf(IllegalArgumentException.class).hasMessage(alone.getMessage());
        assertThatThrownBy(() -> model.prepare(bert(1, 1, 3, 0, false, false, Set.of()).inputs(), Set.of("logits")))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("has no output 'logits'");
    }

    @Test
    void mlpRowsConcatenatedGiveEachRequestItsOwnRowsAndSelection() {
        HostTensorOps ops = new HostTensorOps();
        BatchableModel model = models.load("iris-mlp", ops);
        assertThat(model).isInstanceOf(MlpModel.class);

        assertBatchEqualsAlone(model, ops, irisRequests());
    }
}
