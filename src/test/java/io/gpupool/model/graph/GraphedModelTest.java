package io.gpupool.model.graph;

import io.gpupool.backend.DeviceStream;
import io.gpupool.kernels.host.HostTensorOps;
import io.gpupool.memory.pool.DevicePool;
import io.gpupool.model.ExecutionContext;
import io.gpupool.model.HostTensor;
import io.gpupool.model.InferenceModel;
import io.gpupool.model.PlannedMemory;
import org.junit.jupiter.api.AutoClose;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.Set;

import static io.gpupool.model.testing.Fixtures.floats;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * The tiny BERT on the host backend behind the graph cache, with {@link RecordingGraphCapture} as the
 * capturing backend and the two-level pool for activations and graph blocks: what a client and an
 * operator see (outputs, pool bytes, cache numbers), not how the cache does it.
 */
class GraphedModelTest {

    private static final ShapeBuckets BUCKETS = new ShapeBuckets(List.of(1, 2, 4, 8), List.of(8, 16, 32, 64));

    private final TinyBertRequests requests = new TinyBertRequests(new Random(14), TinyBertRequests.TokenTypes.HALVES);

    @AutoClose
    private final HostGraphBench bench = new HostGraphBench();
    private final DevicePool pool = bench.pool;
    private final RecordingGraphCapture capture = bench.capture;
    private final InferenceModel bert = bench.bert;
    private final DeviceGraphs graphs = bench.openGraphs(BUCKETS);
    private final InferenceModel graphed = graphs.wrap(bert);

    private ExecutionContext context() {
        return bench.context();
    }

    @Test
    void replayedOutputsEqualTheUnpaddedEagerRun() {
        int[][] shapes = {{1, 5}, {1, 8}, {2, 9}, {3, 20}, {1, 3}, {4, 16}};
        for (int[] shape : shapes) {
            for (int round = 0; round < 2; round++) {
                List<HostTensor> inputs = request(shape[0], shape[1], true, true);
                assertSameOutputs(graphed.infer(inputs, Set.of(), context()), bert.infer(inputs, Set.of(), context()));
            }
        }
        GraphCacheMetrics m = graphs.metrics();
        // buckets 1x8 (for 1x5, 1x8, 1x3), 2x16, 4x32, 4x16
        assertThat(m.captures()).isEqualTo(4);
        assertThat(m.hits()).isEqualTo(2 * shapes.length - 4);
        assertThat(m.failures()).isZero();
        assertThat(m.graphs()).isEqualTo(4);
    }

    @Test
    void requestsWithoutMaskOrTokenTypesGetTheirOwnGraphAndEqualOutputs() {
        for (int round = 0; round < 2; round++) {
            List<HostTensor> idsOnly = request(2, 6, false, false);
            assertSameOutputs(graphed.infer(idsOnly, Set.of("last_hidden_state"), context()),
                    bert.infer(idsOnly, Set.of("last_hidden_state"), context()));
        }
        assertThat(graphs.metrics().hits()).isEqualTo(1);
        assertThat(graphed.infer(request(2, 6, true, false), Set.of("last_hidden_state"), context()).getFirst().shape())
                .containsExactly(2, 6, 32);
    }

    @Test
    void aRequestNamingEveryOutputReplaysTheGraphOfOneNamingNoneAndOneOutputGetsItsOwn() {
        Set<String> every = Set.of("last_hidden_state", "pooler_output");
        List<HostTensor> first = request(2, 12, true, true);
        assertSameOutputs(graphed.infer(first, Set.of(), context()), bert.infer(first, Set.of(), context()));
        List<HostTensor> second = request(2, 10, true, true);
        assertSameOutputs(graphed.infer(second, every, context()), bert.infer(second, every, context()));
        assertThat(graphs.metrics().hits()).as("the same computation, one graph").isEqualTo(1);

        List<HostTensor> pooledOnly = request(2, 11, true, true);
        assertSameOutputs(graphed.infer(pooledOnly, Set.of("pooler_output"), context()),
                bert.infer(pooledOnly, Set.of("pooler_output"), context()));
        assertThat(graphs.metrics().captures()).isEqualTo(2);
    }

    @Test
    void graphMemoryIsPoolMemoryHeldWhileCachedAndGivenBackOnClose() {
        graphed.infer(request(2, 10, true, true), Set.of(), context());
        graphed.infer(request(1, 30, true, true), Set.of(), context());

        long held = graphs.metrics().bytes();
        assertThat(graphs.metrics().graphs()).isEqualTo(2);
        long planned = ((PlannedMemory) bert).peakActivationBytes(2, 16) + ((PlannedMemory) bert).peakActivationBytes(1, 32);
        assertThat(held).as("blocks packed from the trace, against the plans' peaks").isBetween(planned, planned * 5 / 4);
        assertThat(pool.metrics().allocatedBytes()).isEqualTo(held);
        assertThat(capture.liveGraphs).hasValue(2);

        graphed.close(); // model unload frees its graphs
        assertThat(pool.metrics().allocatedBytes()).isZero();
        assertThat(graphs.metrics().graphs()).isZero();
        assertThat(graphs.metrics().bytes()).isZero();
        assertThat(capture.liveGraphs).hasValue(0);
    }

    @Test
    void theCacheKeepsToItsCountAndByteBounds() {
        graphs.tune(new GraphLimits(true, 2, 1L << 30));
        int[][] shapes = {{1, 8}, {2, 16}, {4, 32}, {8, 64}, {1, 8}};
        for (int[] shape : shapes) {
            List<HostTensor> inputs = request(shape[0], shape[1], true, true);
            assertSameOutputs(graphed.infer(inputs, Set.of(), context()), bert.infer(inputs, Set.of(), context()));
            assertThat(graphs.metrics().graphs()).isLessThanOrEqualTo(2);
            assertThat(pool.metrics().allocatedBytes()).isEqualTo(graphs.metrics().bytes());
            assertThat(capture.liveGraphs.get()).isEqualTo(graphs.metrics().graphs());
        }
        assertThat(graphs.metrics().evictions()).isGreaterThanOrEqualTo(2);

        long oneGraph = graphs.metrics().bytes() / graphs.metrics().graphs();
        graphs.tune(new GraphLimits(true, 16, 1024));
        assertThat(graphs.metrics().graphs()).isZero();
        assertThat(pool.metrics().allocatedBytes()).isZero();
        List<HostTensor> inputs = request(1, 4, true, true);
        assertSameOutputs(graphed.infer(inputs, Set.of(), context()), bert.infer(inputs, Set.of(), context()));
        assertThat(graphs.metrics().graphs()).as("a graph of %d bytes does not fit in 1024", oneGraph).isZero();
        assertThat(pool.metrics().allocatedBytes()).isZero();
    }

    @Test
    void aFailedCaptureFallsBackToEagerIsCountedAndNotRetried() {
        capture.failNextEnd = true;
        for (int round = 0; round < 3; round++) {
            List<HostTensor> inputs = request(2, 12, true, true);
            assertSameOutputs(graphed.infer(inputs, Set.of(), context()), bert.infer(inputs, Set.of(), context()));
        }
        assertThat(graphs.metrics().captureFailures()).isEqualTo(1);
        assertThat(graphs.metrics().replayFailures()).isZero();
        assertThat(graphs.metrics().graphs()).isZero();
        assertThat(capture.begun).hasValue(1);
        assertThat(pool.metrics().allocatedBytes()).isZero();
    }

    @Test
    void aReplayThatFailsIsAnsweredEagerlyAndItsGraphFreed() {
        graphed.infer(request(2, 12, true, true), Set.of(), context());
        assertThat(graphs.metrics().graphs()).isEqualTo(1);

        capture.failNextLaunch = true;
        List<HostTensor> inputs = request(2, 12, true, true);
        assertSameOutputs(graphed.infer(inputs, Set.of(), context()), bert.infer(inputs, Set.of(), context()));
        assertThat(graphs.metrics().replayFailures()).isEqualTo(1);
        assertThat(graphs.metrics().captureFailures()).as("its capture had worked").isZero();
        assertThat(graphs.metrics().graphs()).isZero();
        assertThat(capture.liveGraphs).hasValue(0);
        assertThat(pool.metrics().allocatedBytes()).isZero();
    }

    @Test
    void switchingGraphsOffFreesThemAndRequestsRunEagerly() {
        graphed.infer(request(2, 12, true, true), Set.of(), context());
        assertThat(graphs.metrics().graphs()).isEqualTo(1);

        graphs.tune(new GraphLimits(false, 16, 1L << 30));
        assertThat(graphs.metrics().graphs()).isZero();
        assertThat(pool.metrics().allocatedBytes()).isZero();
        List<HostTensor> inputs = request(2, 12, true, true);
        assertSameOutputs(graphed.infer(inputs, Set.of(), context()), bert.infer(inputs, Set.of(), context()));
        assertThat(capture.begun).hasValue(1);
    }

    @Test
    void aBadTokenIdIsRefusedOnAReplayWithTheEagerMessageAndTheGraphStaysUsable() {
        graphed.infer(request(1, 7, true, true), Set.of(), context());
        List<HostTensor> bad = request(1, 7, true, true);
        bad.set(0, tensor("input_ids", 1, 7, new long[] {1, 2, 3, 100, 4, 5, 6}));

        assertThatThrownBy(() -> graphed.infer(bad, Set.of(), context()))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("vocab_size");
        long hits = graphs.metrics().hits();
        List<HostTensor> good = request(1, 7, true, true);
        assertSameOutputs(graphed.infer(good, Set.of(), context()), bert.infer(good, Set.of(), context()));
        assertThat(graphs.metrics().hits()).isEqualTo(hits + 1);
        assertThat(graphs.metrics().failures()).isZero();
    }

    @Test
    void aRejectedFirstRequestDoesNotSpoilItsShapesGraph() {
        List<HostTensor> bad = request(1, 7, true, true);
        bad.set(0, tensor("input_ids", 1, 7, new long[] {1, 2, 3, 100, 4, 5, 6}));
        assertThatThrownBy(() -> graphed.infer(bad, Set.of(), context())).isInstanceOf(IllegalArgumentException.class);
        assertThat(capture.begun).hasValue(0);

        for (int round = 0; round < 2; round++) {
            List<HostTensor> good = request(1, 7, true, true);
            assertSameOutputs(graphed.infer(good, Set.of(), context()), bert.infer(good, Set.of(), context()));
        }
        assertThat(graphs.metrics().captures()).isEqualTo(1);
        assertThat(graphs.metrics().hits()).isEqualTo(1);
        assertThat(graphs.metrics().failures()).isZero();
    }

    @Test
    void aCaptureStillQueuedWhenItsModelIsUnloadedIsFreedNotCached() {
        List<Runnable> queued = new ArrayList<>();
        RecordingGraphCapture later = new RecordingGraphCapture(bench.device);
        try (DeviceStream stream = bench.device.createStream(4)) {
            DeviceGraphs deferred = new DeviceGraphs(bench.device, later, stream, pool, new GraphLimits(true, 16, 1L << 30),
                    BUCKETS, queued::add, null);
            InferenceModel model = deferred.wrap(bert);
            model.infer(request(2, 10, true, true), Set.of(), context());
            assertThat(queued).hasSize(1);

            deferred.cache().evictModel(model);        // what unloading the model does first
            queued.removeFirst().run();                // the capture thread gets to it afterwards

            assertThat(later.begun).hasValue(1);
            assertThat(later.liveGraphs).hasValue(0);
            assertThat(deferred.metrics().graphs()).isZero();
            assertThat(pool.metrics().allocatedBytes()).isZero();
            model.infer(request(2, 10, true, true), Set.of(), context());
            assertThat(queued).as("no new capture for an unloaded model").isEmpty();
            deferred.close();
        }
    }

    @Test
    void otherKernelsGetAGraphOfTheirOwn() {
        ExecutionContext other = new ExecutionContext(bench.serving, pool, new HostTensorOps());
        List<HostTensor> inputs = request(2, 10, true, true);
        graphed.infer(inputs, Set.of(), context());
        graphed.infer(inputs, Set.of(), other);
        assertThat(graphs.metrics().captures()).isEqualTo(2);
        assertSameOutputs(graphed.infer(inputs, Set.of(), other), bert.infer(inputs, Set.of(), other));
        assertThat(graphs.metrics().hits()).isEqualTo(1);
    }

    @Test
    void shapesBeyondTheLargestBucketRunEagerlyWithoutAGraph() {
        DeviceGraphs small = new DeviceGraphs(bench.device, new RecordingGraphCapture(bench.device), bench.device.createStream(3), pool,
                new GraphLimits(true, 16, 1L << 30), new ShapeBuckets(List.of(1, 2), List.of(8)), Runnable::run, null);
        try {
            InferenceModel model = small.wrap(bert);
            List<HostTensor> inputs = request(4, 9, true, true);
            assertSameOutputs(model.infer(inputs, Set.of(), context()), bert.infer(inputs, Set.of(), context()));
            assertThat(small.metrics().graphs()).isZero();
            assertThat(small.metrics().misses()).isZero();
        } finally {
            small.close();
        }
    }

    // ---- helpers ------------------------------------------------------------------------------

    private List<HostTensor> request(int batch, int seq, boolean mask, boolean types) {
        return requests.inputs(batch, seq, mask, types);
    }

    private static HostTensor tensor(String name, int batch, int seq, long[] values) {
        return TinyBertRequests.tensor(name, batch, seq, values);
    }

    private static void assertSameOutputs(List<HostTensor> actual, List<HostTensor> expected) {
        assertThat(actual).hasSameSizeAs(expected);
        for (int i = 0; i < expected.size(); i++) {
            assertThat(actual.get(i).name()).isEqualTo(expected.get(i).name());
            assertThat(actual.get(i).shape()).containsExactly(expected.get(i).shape());
            assertThat(floats(actual.get(i))).as(expected.get(i).name()).containsExactly(floats(expected.get(i)));
        }
    }
}
