package io.gpupool.model.graph;

import io.gpupool.model.BatchableModel;
import io.gpupool.model.BatchableModel.Member;
import io.gpupool.model.ExecutionContext;
import io.gpupool.model.HostTensor;
import io.gpupool.model.InferenceModel;
import io.gpupool.model.graph.GraphedBatchChecks.Request;
import io.gpupool.model.graph.RecordingGraphCapture.FailAt;
import io.gpupool.model.testing.WithoutPackedOps;
import org.junit.jupiter.api.AutoClose;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

import java.lang.foreign.MemorySegment;
import java.util.List;
import java.util.Random;
import java.util.Set;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Padded-layout batches (the layout of CUDA BF16) of the tiny BERT behind the graph cache on the host backend
 * ({@link RecordingGraphCapture} as the capturing backend, the two-level pool for activations and graph blocks): a
 * batch [rows, longest] replays the graph of its request bucket, the one a request of that bucket replays, and each
 * member gets what it gets alone; a batch beyond the buckets or the model's cells, or with a fully masked sequence,
 * runs eagerly; a failed capture or replay is answered eagerly, counted and leaves no pool memory behind. The model
 * is planned without packed-sequence ops (so its batches are padded) and runs the host kernels, whose FP32 results
 * hold a member to itself alone within 1e-5.
 */
class GraphedPaddedBatchesTest {

    /** tiny-bert takes at most 8 x 64 = 512 cells; batch buckets above its largest batch, for batches. */
    private static final ShapeBuckets BUCKETS = new ShapeBuckets(List.of(1, 2, 4, 8, 16), List.of(8, 16, 32, 64),
            List.of(16, 32, 64, 128));
    private static final double TOLERANCE = 1e-5;
    private static final Set<String> ALL = Set.of();

    private final TinyBertRequests requests = new TinyBertRequests(new Random(17), TinyBertRequests.TokenTypes.HALVES);

    @AutoClose
    private final HostGraphBench bench = new HostGraphBench(WithoutPackedOps::over);
    private final DeviceGraphs graphs = bench.openGraphs(BUCKETS);
    private final GraphedBatchChecks checks = new GraphedBatchChecks(bench, graphs, TOLERANCE);
    private final BatchableModel bert = checks.bert();
    private final BatchableModel graphed = checks.graphed();

    @BeforeEach
    void setUp() {
        assertThat(bert.batchLayout()).isEqualTo("padded");
    }

    private ExecutionContext context() {
        return bench.context();
    }

    @Test
    void paddedBatchesOfDifferentSizesInOneBucketCaptureOnceThenReplayAndEachMemberGetsWhatItGetsAlone() {
        List<List<Request>> batches = List.of(
                List.of(request(2, 5), request(3, 12)),                                  // 5 rows, longest 12
                List.of(request(1, 16), request(1, 9), request(4, 3), request(1, 1)),    // 7, 16
                List.of(request(8, 10)),                                                 // 8, 10
                List.of(request(2, 11, false, true, ALL), request(3, 16)));              // 5, 16: one without mask
        checks.assertBatchesOfOneBucketCaptureOnceThenReplay("8 x 16", batches);
    }

    @Test
    void aBatchAndARequestOfOneBucketShareOneGraphWhicheverCameFirst() {
        List<HostTensor> request = request(6, 14).inputs();
        assertSameOutputs(((InferenceModel) graphed).infer(request, ALL, context()),
                bert.infer(request, ALL, context()));
        assertEachMemberGetsWhatItGetsAlone(List.of(request(2, 5), request(3, 12)));   // 8 x 16: the request's graph
        assertThat(graphs.metrics().captures()).isEqualTo(1);
        assertThat(graphs.metrics().hits()).isEqualTo(1);

        // Two members selecting one output each compute every output, as a request selecting none does.
        assertEachMemberGetsWhatItGetsAlone(List.of(request(1, 20, true, true, Set.of("last_hidden_state")),
                request(2, 30, true, true, Set.of("pooler_output"))));                  // 4 x 32: captured here
        List<HostTensor> after = request(3, 25).inputs();
        assertSameOutputs(((InferenceModel) graphed).infer(after, ALL, context()), bert.infer(after, ALL, context()));
        GraphCacheMetrics m = graphs.metrics();
        assertThat(m.captures()).isEqualTo(2);
        assertThat(m.hits()).as("the request replayed the batch's graph").isEqualTo(2);
        assertThat(m.failures()).isZero();
    }

    @Test
    void otherInputsAndOutputsGetGraphsOfTheirOwnAndReplayThem() {
        List<List<Request>> batches = List.of(
                List.of(request(2, 5), request(1, 7)),                                              // 4 x 8
                List.of(request(2, 5, true, false, ALL), request(1, 7, false, false, ALL)),         // no types
                List.of(request(2, 5, true, true, Set.of("pooler_output")),
                        request(1, 7, false, true, Set.of("pooler_output"))));                      // one output
        checks.assertEachBatchGetsAGraphOfItsOwnAndReplaysIt(batches);
    }

    @Test
    void aBatchOfMoreRowsThanTheLargestRequestReplaysWhileItsBucketsCellsFit() {
        for (int round = 0; round < 2; round++) {
            assertEachMemberGetsWhatItGetsAlone(List.of(request(8, 10), request(2, 9)));   // 10 rows -> 16 x 16
        }
        assertThat(graphs.metrics().captures()).isEqualTo(1);
        assertThat(graphs.metrics().hits()).isEqualTo(1);
    }

    @Test
    void batchesBeyondTheBucketsOrTheModelsCellsRunEagerlyWithoutAGraph() {
        List<List<Request>> batches = List.of(
                List.of(request(8, 2), request(8, 2), request(1, 2)),   // 17 rows: above the largest batch bucket
                List.of(request(8, 40), request(1, 40)));              // 9 x 40 fits, its bucket 16 x 64 does not
        for (int round = 0; round < 2; round++) {
            for (List<Request> batch : batches) {
                assertThat(bert.fitsOneForward(members(batch))).isTrue();
                assertEachMemberGetsWhatItGetsAlone(batch);
            }
        }
        checks.assertNoGraphLookedUpNorCaptured();
    }

    @Test
    void aBatchWithAFullyMaskedSequenceRunsEagerlyAsTheEagerBatch() {
        Request masked = request(2, 6);
        MemorySegment mask = masked.inputs().get(1).data();
        for (int s = 0; s < 6; s++) {
            mask.setAtIndex(java.lang.foreign.ValueLayout.JAVA_LONG, 6 + s, 0);   // its second sequence: no token
        }
        List<Request> batch = List.of(masked, request(1, 11));
        for (int round = 0; round < 2; round++) {
            assertSameMemberOutputs(graphed.inferBatch(members(batch), context()),
                    bert.inferBatch(members(batch), context()));
        }
        assertThat(graphs.metrics().misses()).isZero();
        assertThat(bench.capture.begun).hasValue(0);
    }

    @Test
    void withGraphsOffPaddedBatchesRunEagerly() {
        checks.assertWithGraphsOffABatchRunsEagerly(List.of(request(2, 5), request(1, 7)));
    }

    @ParameterizedTest
    @EnumSource(FailAt.class)
    void aFailedCaptureIsAnsweredEagerlyCountedOnceNotRetriedAndLeavesNothingBehind(FailAt point) {
        checks.assertAFailedCaptureIsAnsweredEagerlyCountedOnceNotRetriedAndLeavesNothingBehind(point,
                () -> List.of(request(2, 5), request(1, 7)));
    }

    @Test
    void aFailedWarmUpIsAnsweredEagerlyAndLeavesNothingBehind() {
        bench.capture.failNextWarmUp = true;
        assertEachMemberGetsWhatItGetsAlone(List.of(request(2, 5), request(1, 7)));

        assertThat(graphs.metrics().captureFailures()).isEqualTo(1);
        assertThat(graphs.metrics().graphs()).isZero();
        assertThat(bench.pool.metrics().allocatedBytes()).isZero();
    }

    @Test
    void aFailedReplayIsAnsweredEagerlyAndItsGraphFreed() {
        checks.assertAFailedReplayIsAnsweredEagerlyAndItsGraphFreed(List.of(request(2, 5), request(1, 7)),
                () -> List.of(request(1, 8), request(2, 6)));                      // the same bucket: 4 x 8
    }

    @Test
    void paddedBatchGraphsAreBoundedByTheCacheAndGiveTheirPoolMemoryBackOnUnload() {
        checks.assertBatchGraphsAreBoundedByTheCacheAndGiveTheirPoolMemoryBackOnUnload(List.of(
                List.of(request(2, 5)),                  // 2 x 8
                List.of(request(2, 5), request(1, 7)),   // 4 x 8
                List.of(request(2, 20), request(1, 9)),  // 4 x 32
                List.of(request(2, 60))));               // 2 x 64
    }

    // ---- helpers ------------------------------------------------------------------------------

    private void assertEachMemberGetsWhatItGetsAlone(List<Request> batch) {
        checks.assertEachMemberGetsWhatItGetsAlone(batch);
    }

    private List<Member> members(List<Request> batch) {
        return checks.members(batch);
    }

    private void assertSameMemberOutputs(List<List<HostTensor>> actual, List<List<HostTensor>> expected) {
        checks.assertSameMemberOutputs(actual, expected);
    }

    private void assertSameOutputs(List<HostTensor> actual, List<HostTensor> expected) {
        checks.assertSameOutputs(actual, expected);
    }

    private Request request(int batch, int seq) {
        return request(batch, seq, true, true, ALL);
    }

    private Request request(int batch, int seq, boolean mask, boolean types, Set<String> outputs) {
        return new Request(requests.inputs(batch, seq, mask, types), outputs);
    }
}
