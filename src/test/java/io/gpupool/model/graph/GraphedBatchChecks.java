package io.gpupool.model.graph;

import io.gpupool.model.BatchableModel;
import io.gpupool.model.BatchableModel.Member;
import io.gpupool.model.HostTensor;
import io.gpupool.model.InferenceModel;
import io.gpupool.model.graph.RecordingGraphCapture.FailAt;

import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.function.Supplier;

import static io.gpupool.model.testing.Fixtures.floats;
import static io.gpupool.model.testing.Fixtures.maxAbsDiff;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * What the host batch-graph tests check, whichever layout the model batches in: a batch through the graphed model
 * against each member alone on the unwrapped one, and the cases both layouts must pass alike (a failed capture, a
 * failed replay, the cache's bound and unload). Each case takes its batches from a supplier, so that a test states
 * the shapes it sends and the requests are drawn when they are sent.
 */
final class GraphedBatchChecks {

    /** One client request of a batch: its inputs and the outputs it names (none: all). */
    record Request(List<HostTensor> inputs, Set<String> outputs) {
    }

    private final HostGraphBench bench;
    private final DeviceGraphs graphs;
    private final BatchableModel bert;
    private final BatchableModel graphed;
    private final double tolerance;

    /** {@code graphs} wrap the bench's model; outputs must agree within {@code tolerance}. */
    GraphedBatchChecks(HostGraphBench bench, DeviceGraphs graphs, double tolerance) {
        this.bench = bench;
        this.graphs = graphs;
        this.bert = (BatchableModel) bench.bert;
        this.graphed = (BatchableModel) graphs.wrap(bench.bert);
        this.tolerance = tolerance;
    }

    BatchableModel bert() {
        return bert;
    }

    BatchableModel graphed() {
        return graphed;
    }

    /**
     * Runs {@code batch} through the graphed model, then each request alone on the unwrapped one, and compares: the
     * same outputs, shapes and values within the tolerance.
     */
    void assertEachMemberGetsWhatItGetsAlone(List<Request> batch) {
        List<List<HostTensor>> together = graphed.inferBatch(members(batch), bench.context());
        assertThat(together).hasSameSizeAs(batch);
        for (int i = 0; i < batch.size(); i++) {
            assertSameOutputs(together.get(i),
                    bert.infer(batch.get(i).inputs(), batch.get(i).outputs(), bench.context()));
        }
    }

    /** {@code batch} prepared by the graphed model. */
    List<Member> members(List<Request> batch) {
        List<Member> members = new ArrayList<>();
        for (Request r : batch) {
            members.add(graphed.prepare(r.inputs(), r.outputs()));
        }
        return members;
    }

    void assertSameMemberOutputs(List<List<HostTensor>> actual, List<List<HostTensor>> expected) {
        assertThat(actual).hasSameSizeAs(expected);
        for (int i = 0; i < expected.size(); i++) {
            assertSameOutputs(actual.get(i), expected.get(i));
        }
    }

    void assertSameOutputs(List<HostTensor> actual, List<HostTensor> expected) {
        assertThat(actual).extracting(HostTensor::name)
                .containsExactlyElementsOf(expected.stream().map(HostTensor::name).toList());
        for (int i = 0; i < expected.size(); i++) {
            assertThat(actual.get(i).shape()).containsExactly(expected.get(i).shape());
            assertThat(maxAbsDiff(floats(actual.get(i)), floats(expected.get(i)))).as(expected.get(i).name())
                    .isLessThanOrEqualTo(tolerance);
        }
    }

    // ---- the cases both layouts share ---------------------------------------------------------

    /**
     * {@code batches} all of one {@code bucket}: the first captures its graph, the others replay it, each member gets
     * what it gets alone, and the pool holds the graph's block and nothing of the batches.
     */
    void assertBatchesOfOneBucketCaptureOnceThenReplay(String bucket, List<List<Request>> batches) {
        for (List<Request> batch : batches) {
            assertEachMemberGetsWhatItGetsAlone(batch);
        }
        GraphCacheMetrics m = graphs.metrics();
        assertThat(m.captures()).as("one bucket: %s", bucket).isEqualTo(1);
        assertThat(m.misses()).isEqualTo(1);
        assertThat(m.hits()).isEqualTo(batches.size() - 1);
        assertThat(m.failures()).isZero();
        assertThat(m.graphs()).isEqualTo(1);
        assertThat(bench.pool.metrics().allocatedBytes()).as("the graph's block, nothing of the batches")
                .isEqualTo(m.bytes());
    }

    /** Each of {@code batches}, sent twice, is captured on its first time and replayed on its second. */
    void assertEachBatchGetsAGraphOfItsOwnAndReplaysIt(List<List<Request>> batches) {
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

    /** With graphs switched off, {@code batch} runs eagerly: no lookup, no capture begun. */
    void assertWithGraphsOffABatchRunsEagerly(List<Request> batch) {
        graphs.tune(new GraphLimits(false, 16, 1L << 30));
        assertEachMemberGetsWhatItGetsAlone(batch);
        assertThat(graphs.metrics().misses()).isZero();
        assertThat(bench.capture.begun).hasValue(0);
    }

    /** What batches that run eagerly leave: no lookup, no graph, no capture begun, nothing in the pool. */
    void assertNoGraphLookedUpNorCaptured() {
        assertThat(graphs.metrics().misses()).as("not even looked up").isZero();
        assertThat(graphs.metrics().graphs()).isZero();
        assertThat(bench.capture.begun).hasValue(0);
        assertThat(bench.pool.metrics().allocatedBytes()).isZero();
    }

    /**
     * The capture of {@code batch}'s bucket fails at {@code point}: three batches are answered eagerly, the failure is
     * counted once, the bucket is not captured again, no stream is left capturing and the pool gets every byte back.
     */
    void assertAFailedCaptureIsAnsweredEagerlyCountedOnceNotRetriedAndLeavesNothingBehind(FailAt point,
                                                                                        Supplier<List<Request>> batch) {
        bench.capture.failNext = point;
        for (int round = 0; round < 3; round++) {
            assertEachMemberGetsWhatItGetsAlone(batch.get());
        }
        GraphCacheMetrics m = graphs.metrics();
        assertThat(m.captureFailures()).as("one failure, at %s", point).isEqualTo(1);
        assertThat(m.graphs()).isZero();
        assertThat(bench.capture.begun).as("the failed bucket is not captured again").hasValue(1);
        assertThat(bench.capture.capturing()).isFalse();
        assertThat(bench.capture.liveGraphs).hasValue(0);
        assertThat(bench.pool.metrics().allocatedBytes()).as("graph block and warm-up scratch given back").isZero();
    }

    /**
     * {@code first} captures a graph; the replay of {@code sameBucket} fails: it is answered eagerly, counted as a
     * replay failure, and the graph is freed with its pool block.
     */
    void assertAFailedReplayIsAnsweredEagerlyAndItsGraphFreed(List<Request> first, Supplier<List<Request>> sameBucket) {
        assertEachMemberGetsWhatItGetsAlone(first);
        assertThat(graphs.metrics().graphs()).isEqualTo(1);

        bench.capture.failNextLaunch = true;
        assertEachMemberGetsWhatItGetsAlone(sameBucket.get());
        GraphCacheMetrics m = graphs.metrics();
        assertThat(m.replayFailures()).isEqualTo(1);
        assertThat(m.captureFailures()).isZero();
        assertThat(m.graphs()).isZero();
        assertThat(bench.capture.liveGraphs).hasValue(0);
        assertThat(bench.pool.metrics().allocatedBytes()).isZero();
    }

    /**
     * With room for two graphs, {@code batches} of four buckets: never more than two graphs, the pool holds just their
     * blocks, two evictions; unloading the graphed model leaves nothing behind.
     */
    void assertBatchGraphsAreBoundedByTheCacheAndGiveTheirPoolMemoryBackOnUnload(List<List<Request>> batches) {
        graphs.tune(new GraphLimits(true, 2, 1L << 30));
        for (List<Request> batch : batches) {
            assertEachMemberGetsWhatItGetsAlone(batch);
            assertThat(graphs.metrics().graphs()).isLessThanOrEqualTo(2);
            assertThat(bench.pool.metrics().allocatedBytes()).isEqualTo(graphs.metrics().bytes());
            assertThat(bench.capture.liveGraphs.get()).isEqualTo(graphs.metrics().graphs());
        }
        assertThat(graphs.metrics().evictions()).isEqualTo(2);

        ((InferenceModel) graphed).close();
        bench.assertNothingLeftBehind();
    }
}
