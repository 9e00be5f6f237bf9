package io.gpupool.model.graph;

import io.gpupool.backend.ComputeDevice;
import io.gpupool.backend.DeviceStream;
import io.gpupool.backend.host.HostBackend;
import io.gpupool.kernels.host.HostTensorOps;
import io.gpupool.memory.DeviceAllocator;
import io.gpupool.memory.PoolConfig;
import io.gpupool.memory.metric.AllocatorMode;
import io.gpupool.memory.pool.DevicePool;
import io.gpupool.model.BatchableModel;
import io.gpupool.model.BatchableModel.Member;
import io.gpupool.model.DataType;
import io.gpupool.model.ExecutionContext;
import io.gpupool.model.HostTensor;
import io.gpupool.model.InferenceModel;
import io.gpupool.model.LoadTarget;
import io.gpupool.model.graph.RecordingGraphCapture.FailAt;
import io.gpupool.model.repository.ModelRepository;
import io.gpupool.model.testing.WithoutPackedOps;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.Set;

import static io.gpupool.model.testing.Fixtures.fixture;
import static io.gpupool.model.testing.Fixtures.floats;
import static io.gpupool.model.testing.Fixtures.maxAbsDiff;
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

    private HostBackend host;
    private ComputeDevice device;
    private DeviceStream serving;
    private DeviceStream graphStream;
    private DevicePool pool;
    private DeviceAllocator weights;
    private HostTensorOps ops;
    private BatchableModel bert;
    private RecordingGraphCapture capture;
    private DeviceGraphs graphs;
    private BatchableModel graphed;
    private final Random random = new Random(17);

    @BeforeEach
    void setUp() {
        host = new HostBackend();
        device = host.devices().getFirst();
        serving = device.createStream(0);
        graphStream = device.createStream(1);
        pool = new DevicePool(device.chunkSource(), PoolConfig.defaults());
        weights = device.nativeAllocator(AllocatorMode.DIRECT).orElseThrow();
        ops = new HostTensorOps();
        try (DeviceStream load = device.createStream(2)) {
            bert = (BatchableModel) ModelRepository.loadModel("tiny-bert", fixture("tiny-bert"),
                    new LoadTarget(load, weights, WithoutPackedOps.over(ops)));
        }
        assertThat(bert.batchLayout()).isEqualTo("padded");
        capture = new RecordingGraphCapture(device);
        graphs = new DeviceGraphs(device, capture, graphStream, pool, new GraphLimits(true, 16, 1L << 30), BUCKETS,
                Runnable::run, null);
        graphed = (BatchableModel) graphs.wrap(bert);
    }

    @AfterEach
    void tearDown() {
        graphs.close();
        bert.close();
        serving.close();
        pool.close();
        weights.close();
        host.close();
    }

    private ExecutionContext context() {
        return new ExecutionContext(serving, pool, ops);
    }

    @Test
    void paddedBatchesOfDifferentSizesInOneBucketCaptureOnceThenReplayAndEachMemberGetsWhatItGetsAlone() {
        List<List<Request>> batches = List.of(
                List.of(request(2, 5), request(3, 12)),                                  // 5 rows, longest 12
                List.of(request(1, 16), request(1, 9), request(4, 3), request(1, 1)),    // 7, 16
                List.of(request(8, 10)),                                                 // 8, 10
                List.of(request(2, 11, false, true, ALL), request(3, 16)));              // 5, 16: one without mask
        for (List<Request> batch : batches) {
            assertEachMemberGetsWhatItGetsAlone(batch);
        }
        GraphCacheMetrics m = graphs.metrics();
        assertThat(m.captures()).as("one bucket: 8 x 16").isEqualTo(1);
        assertThat(m.misses()).isEqualTo(1);
        assertThat(m.hits()).isEqualTo(batches.size() - 1);
        assertThat(m.failures()).isZero();
        assertThat(m.graphs()).isEqualTo(1);
        assertThat(pool.metrics().allocatedBytes()).as("the graph's block, nothing of the batches")
                .isEqualTo(m.bytes());
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
        for (int round = 0; round < 2; round++) {
            for (List<Request> batch : batches) {
                assertEachMemberGetsWhatItGetsAlone(batch);
            }
        }
        GraphCacheMetrics m = graphs.metrics();
        assertThat(m.captures()).isEqualTo(batches.size());
        assertThat(m.hits()).isEqualTo(batches.size());
        assertThat(m.failures()).isZero();
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
        assertThat(graphs.metrics().misses()).as("not even looked up").isZero();
        assertThat(graphs.metrics().graphs()).isZero();
        assertThat(capture.begun).hasValue(0);
        assertThat(pool.metrics().allocatedBytes()).isZero();
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
        assertThat(capture.begun).hasValue(0);
    }

    @Test
    void withGraphsOffPaddedBatchesRunEagerly() {
        graphs.tune(new GraphLimits(false, 16, 1L << 30));
        assertEachMemberGetsWhatItGetsAlone(List.of(request(2, 5), request(1, 7)));

        assertThat(graphs.metrics().misses()).isZero();
        assertThat(capture.begun).hasValue(0);
    }

    @ParameterizedTest
    @EnumSource(FailAt.class)
    void aFailedCaptureIsAnsweredEagerlyCountedOnceNotRetriedAndLeavesNothingBehind(FailAt point) {
        capture.failNext = point;
        for (int round = 0; round < 3; round++) {
            assertEachMemberGetsWhatItGetsAlone(List.of(request(2, 5), request(1, 7)));
        }
        GraphCacheMetrics m = graphs.metrics();
        assertThat(m.captureFailures()).as("one failure, at %s", point).isEqualTo(1);
        assertThat(m.graphs()).isZero();
        assertThat(capture.begun).as("the failed bucket is not captured again").hasValue(1);
        assertThat(capture.capturing()).isFalse();
        assertThat(capture.liveGraphs).hasValue(0);
        assertThat(pool.metrics().allocatedBytes()).as("graph block and warm-up scratch given back").isZero();
    }

    @Test
    void aFailedWarmUpIsAnsweredEagerlyAndLeavesNothingBehind() {
        capture.failNextWarmUp = true;
        assertEachMemberGetsWhatItGetsAlone(List.of(request(2, 5), request(1, 7)));

        assertThat(graphs.metrics().captureFailures()).isEqualTo(1);
        assertThat(graphs.metrics().graphs()).isZero();
        assertThat(pool.metrics().allocatedBytes()).isZero();
    }

    @Test
    void aFailedReplayIsAnsweredEagerlyAndItsGraphFreed() {
        assertEachMemberGetsWhatItGetsAlone(List.of(request(2, 5), request(1, 7)));
        assertThat(graphs.metrics().graphs()).isEqualTo(1);

        capture.failNextLaunch = true;
        assertEachMemberGetsWhatItGetsAlone(List.of(request(1, 8), request(2, 6)));
        GraphCacheMetrics m = graphs.metrics();
        assertThat(m.replayFailures()).isEqualTo(1);
        assertThat(m.captureFailures()).isZero();
        assertThat(m.graphs()).isZero();
        assertThat(capture.liveGraphs).hasValue(0);
        assertThat(pool.metrics().allocatedBytes()).isZero();
    }

    @Test
    void paddedBatchGraphsAreBoundedByTheCacheAndGiveTheirPoolMemoryBackOnUnload() {
        graphs.tune(new GraphLimits(true, 2, 1L << 30));
        List<List<Request>> batches = List.of(
                List.of(request(2, 5)),                  // 2 x 8
                List.of(request(2, 5), request(1, 7)),   // 4 x 8
                List.of(request(2, 20), request(1, 9)),  // 4 x 32
                List.of(request(2, 60)));                // 2 x 64
        for (List<Request> batch : batches) {
            assertEachMemberGetsWhatItGetsAlone(batch);
            assertThat(graphs.metrics().graphs()).isLessThanOrEqualTo(2);
            assertThat(pool.metrics().allocatedBytes()).isEqualTo(graphs.metrics().bytes());
            assertThat(capture.liveGraphs.get()).isEqualTo(graphs.metrics().graphs());
        }
        assertThat(graphs.metrics().evictions()).isEqualTo(2);

        ((InferenceModel) graphed).close();
        assertThat(graphs.metrics().graphs()).isZero();
        assertThat(pool.metrics().allocatedBytes()).isZero();
        assertThat(capture.liveGraphs).hasValue(0);
    }

    // ---- helpers ------------------------------------------------------------------------------

    private record Request(List<HostTensor> inputs, Set<String> outputs) {
    }

    /**
     * Runs {@code batch} through the graphed model, then each request alone on the unwrapped one, and compares: the
     * same outputs, shapes and values within {@link #TOLERANCE}.
     */
    private void assertEachMemberGetsWhatItGetsAlone(List<Request> batch) {
        List<List<HostTensor>> together = graphed.inferBatch(members(batch), context());
        assertThat(together).hasSameSizeAs(batch);
        for (int i = 0; i < batch.size(); i++) {
            assertSameOutputs(together.get(i), bert.infer(batch.get(i).inputs(), batch.get(i).outputs(), context()));
        }
    }

    private List<Member> members(List<Request> batch) {
        List<Member> members = new ArrayList<>();
        for (Request r : batch) {
            members.add(graphed.prepare(r.inputs(), r.outputs()));
        }
        return members;
    }

    private static void assertSameMemberOutputs(List<List<HostTensor>> actual, List<List<HostTensor>> expected) {
        assertThat(actual).hasSameSizeAs(expected);
        for (int i = 0; i < expected.size(); i++) {
            assertSameOutputs(actual.get(i), expected.get(i));
        }
    }

    private static void assertSameOutputs(List<HostTensor> actual, List<HostTensor> expected) {
        assertThat(actual).extracting(HostTensor::name)
                .containsExactlyElementsOf(expected.stream().map(HostTensor::name).toList());
        for (int i = 0; i < expected.size(); i++) {
            assertThat(actual.get(i).shape()).containsExactly(expected.get(i).shape());
            assertThat(maxAbsDiff(floats(actual.get(i)), floats(expected.get(i)))).as(expected.get(i).name())
                    .isLessThanOrEqualTo(TOLERANCE);
        }
    }

    private Request request(int batch, int seq) {
        return request(batch, seq, true, true, ALL);
    }

    private Request request(int batch, int seq, boolean mask, boolean types, Set<String> outputs) {
        long[] ids = new long[batch * seq];
        long[] maskValues = new long[batch * seq];
        long[] typeValues = new long[batch * seq];
        for (int b = 0; b < batch; b++) {
            int real = 1 + random.nextInt(seq);                 // trailing padding of the client's own
            for (int s = 0; s < seq; s++) {
                ids[b * seq + s] = random.nextInt(100);
                maskValues[b * seq + s] = s < real ? 1 : 0;
                typeValues[b * seq + s] = s < seq / 2 ? 0 : 1;
            }
        }
        List<HostTensor> inputs = new ArrayList<>();
        inputs.add(tensor("input_ids", batch, seq, ids));
        if (mask) {
            inputs.add(tensor("attention_mask", batch, seq, maskValues));
        }
        if (types) {
            inputs.add(tensor("token_type_ids", batch, seq, typeValues));
        }
        return new Request(inputs, outputs);
    }

    private static HostTensor tensor(String name, int batch, int seq, long[] values) {
        return new HostTensor(name, DataType.INT64, new long[] {batch, seq}, MemorySegment.ofArray(values));
    }
}
