package io.gpupool.model.graph;

import io.gpupool.model.BatchableModel;
import io.gpupool.model.BatchableModel.Member;
import io.gpupool.model.ExecutionContext;
import io.gpupool.model.HostTensor;
import io.gpupool.model.graph.GraphedBatchChecks.Request;
import io.gpupool.model.graph.RecordingGraphCapture.FailAt;
import org.junit.jupiter.api.AutoClose;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

import java.util.List;
import java.util.Random;
import java.util.Set;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Packed batches of the tiny BERT behind the graph cache on the host backend ({@link RecordingGraphCapture} as the
 * capturing backend, the two-level pool for activations and graph blocks): batches of different sizes in one token
 * bucket replay one graph, each member gets what it gets alone, a batch beyond the buckets runs eagerly, and a failed
 * capture or replay is answered eagerly, counted and leaves no pool memory behind.
 */
class GraphedBatchesTest {

    /** Request buckets as GraphedModelTest's; packed batches by tokens 16, 32, 64, 128. */
    private static final ShapeBuckets BUCKETS = new ShapeBuckets(List.of(1, 2, 4, 8), List.of(8, 16, 32, 64),
            List.of(16, 32, 64, 128));
    private static final double TOLERANCE = 1e-5;

    private final TinyBertRequests requests = new TinyBertRequests(new Random(16), TinyBertRequests.TokenTypes.HALVES);

    @AutoClose
    private final HostGraphBench bench = new HostGraphBench();
    private final DeviceGraphs graphs = bench.openGraphs(BUCKETS);
    private final GraphedBatchChecks checks = new GraphedBatchChecks(bench, graphs, TOLERANCE);
    private final BatchableModel bert = checks.bert();
    private final BatchableModel graphed = checks.graphed();

    private ExecutionContext context() {
        return bench.context();
    }

    @Test
    void batchesOfDifferentSizesInOneBucketReplayOneGraphCapturedOnceAndEachMemberGetsWhatItGetsAlone() {
        List<List<Request>> batches = List.of(
                List.of(request(2, 5), request(1, 7)),                           // 3 sequences, 17 tokens
                List.of(request(1, 9), request(1, 9), request(1, 9), request(1, 3)), // 4, 30
                List.of(request(3, 8)),                                           // 3, 24
                List.of(request(1, 12), request(1, 4), request(1, 1)));           // 3, 17
        checks.assertBatchesOfOneBucketCaptureOnceThenReplay("4 sequences, 32 tokens", batches);
    }

    @Test
    void otherBucketsInputsAndOutputsGetGraphsOfTheirOwnAndReplayThem() {
        List<List<Request>> batches = List.of(
                List.of(request(2, 5), request(1, 7)),                           // (4, 32)
                List.of(request(2, 20), request(1, 9)),                           // (4, 64)
                List.of(request(1, 40)),                                          // (1, 64)
                List.of(request(2, 5, false, false, Set.of()), request(1, 7, false, false, Set.of())),  // no mask, types
                List.of(request(2, 5, true, true, Set.of("pooler_output")), request(1, 7, true, true,
                        Set.of("pooler_output"))));                               // one output
        checks.assertEachBatchGetsAGraphOfItsOwnAndReplaysIt(batches);
    }

    @Test
    void aBatchNeverReplaysTheGraphOfARequestOfTheSameNumbers() {
        List<HostTensor> fourBy32 = request(4, 30).inputs();
        graphed.infer(fourBy32, Set.of(), context());                            // request graph 4 x 32
        assertEachMemberGetsWhatItGetsAlone(List.of(request(2, 5), request(1, 7)));  // batch graph: 4 sequences, 32 tokens

        assertThat(graphs.metrics().captures()).isEqualTo(2);
        assertThat(graphs.metrics().hits()).isZero();
    }

    @Test
    void batchesBeyondTheLargestTokenBucketRunEagerlyWithoutAGraph() {
        assertEachMemberGetsWhatItGetsAlone(List.of(request(4, 30), request(1, 9)));   // 139 tokens > 128
        assertEachMemberGetsWhatItGetsAlone(List.of(request(4, 30), request(1, 9)));

        checks.assertNoGraphLookedUpNorCaptured();
    }

    @Test
    void withoutTokenBucketsOrWithGraphsOffBatchesRunEagerly() {
        DeviceGraphs requestsOnly = new DeviceGraphs(bench.device, new RecordingGraphCapture(bench.device),
                bench.device.createStream(3), bench.pool, HostGraphBench.ON,
                new ShapeBuckets(List.of(1, 2, 4, 8), List.of(8, 16, 32, 64)), Runnable::run, null);
        try {
            BatchableModel model = (BatchableModel) requestsOnly.wrap(bert);
            List<Request> batch = List.of(request(2, 5), request(1, 7));
            checks.assertSameMemberOutputs(model.inferBatch(members(batch), context()),
                    bert.inferBatch(members(batch), context()));
            assertThat(requestsOnly.metrics().misses()).isZero();
        } finally {
            requestsOnly.close();
        }

        checks.assertWithGraphsOffABatchRunsEagerly(List.of(request(2, 5), request(1, 7)));
    }

    @ParameterizedTest
    @EnumSource(FailAt.class)
    void aFailedBatchCaptureIsAnsweredEagerlyCountedOnceNotRetriedAndLeavesNothingBehind(FailAt point) {
        checks.assertAFailedCaptureIsAnsweredEagerlyCountedOnceNotRetriedAndLeavesNothingBehind(point,
                () -> List.of(request(2, 5), request(1, 7)));
    }

    @Test
    void aFailedBatchReplayIsAnsweredEagerlyAndItsGraphFreed() {
        checks.assertAFailedReplayIsAnsweredEagerlyAndItsGraphFreed(List.of(request(2, 5), request(1, 7)),
                () -> List.of(request(1, 12), request(2, 6)));                     // the same bucket: (4, 32)
    }

    @Test
    void batchGraphsAreBoundedByTheCacheAndGiveTheirPoolMemoryBackOnUnload() {
        checks.assertBatchGraphsAreBoundedByTheCacheAndGiveTheirPoolMemoryBackOnUnload(List.of(
                List.of(request(2, 5)),                  // (2, 16)
                List.of(request(2, 5), request(1, 7)),   // (4, 32)
                List.of(request(2, 20), request(1, 9)),  // (4, 64)
                List.of(request(2, 60))));               // (2, 128)
    }

    // ---- helpers ------------------------------------------------------------------------------

    private void assertEachMemberGetsWhatItGetsAlone(List<Request> batch) {
        checks.assertEachMemberGetsWhatItGetsAlone(batch);
    }

    private List<Member> members(List<Request> batch) {
        return checks.members(batch);
    }

    private Request request(int batch, int seq) {
        return request(batch, seq, true, true, Set.of());
    }

    private Request request(int batch, int seq, boolean mask, boolean types, Set<String> outputs) {
        return new Request(requests.inputs(batch, seq, mask, types), outputs);
    }
}
