package io.gpupool.model.graph;

import io.gpupool.backend.DeviceStream;
import io.gpupool.memory.AllocationStream;
import io.gpupool.memory.DeviceAllocator;
import io.gpupool.memory.DeviceBlock;
import io.gpupool.memory.metric.AllocatorMetrics;
import io.gpupool.memory.metric.AllocatorMode;
import io.gpupool.memory.pool.DevicePool;
import io.gpupool.model.ExecutionContext;
import io.gpupool.model.HostTensor;
import io.gpupool.model.InferenceModel;
import io.gpupool.model.graph.RecordingGraphCapture.FailAt;
import org.junit.jupiter.api.AutoClose;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

import java.util.ArrayList;
import java.util.List;
import java.util.Queue;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;

import static io.gpupool.model.testing.Fixtures.floats;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * What a client and an operator see when a graph capture fails or runs beside serving load: the
 * request is answered with the eager result, the failure is counted once, its shape is tried again
 * only after many more requests and given up after a few failures, no stream is left capturing, the pool gets every byte back, and requests never
 * wait for a capture. The tiny BERT on the host backend, {@link RecordingGraphCapture} failing where
 * CUDA can fail, and the two-level pool behind a guard that refuses what is illegal under capture:
 * a pool call from the capturing thread while it captures, and any block on the capture stream (the
 * capture stream must never become a pool stream, or the pool would record and query its fences).
 */
class GraphCaptureRobustnessTest {

    private static final ShapeBuckets BUCKETS = new ShapeBuckets(List.of(1, 2, 4, 8), List.of(8, 16, 32, 64));

    private final TinyBertRequests requests = new TinyBertRequests(new Random(14), TinyBertRequests.TokenTypes.HALVES);

    @AutoClose
    private final HostGraphBench bench = new HostGraphBench();
    private final DeviceStream serving = bench.serving;
    private final DevicePool pool = bench.pool;
    private final RecordingGraphCapture capture = bench.capture;
    private final CaptureGuard guarded = new CaptureGuard(pool, capture);
    private DeviceGraphs graphs;
    private InferenceModel graphed;

    private void openGraphs(ExecutorService executor) {
        graphs = bench.openGraphs(guarded, HostGraphBench.ON, BUCKETS, executor == null ? Runnable::run : executor,
                executor);
        graphed = graphs.wrap(bench.bert);
    }

    private ExecutionContext context(DeviceStream stream) {
        return new ExecutionContext(stream, guarded, bench.ops);
    }

    @ParameterizedTest
    @EnumSource(FailAt.class)
    void aCaptureFailingAnywhereIsAnsweredEagerlyCountedOnceNotRetriedAndLeavesNothingBehind(FailAt point) {
        openGraphs(null);
        capture.failNext = point;
        for (int round = 0; round < 3; round++) {
            List<HostTensor> inputs = request(2, 12);
            assertSameOutputs(graphed.infer(inputs, Set.of(), context(serving)), eager(inputs, serving));
        }
        assertThat(graphs.metrics().captureFailures()).as("one failure, at %s", point).isEqualTo(1);
        assertThat(graphs.metrics().replayFailures()).isZero();
        assertThat(graphs.metrics().captures()).isZero();
        assertThat(graphs.metrics().graphs()).isZero();
        assertThat(capture.begun).as("the failed shape is not captured again").hasValue(1);
        assertThat(capture.capturing()).as("no stream left capturing").isFalse();
        assertThat(capture.liveGraphs).hasValue(0);
        assertThat(pool.metrics().allocatedBytes()).as("graph block and warm-up scratch given back").isZero();
        assertThat(guarded.violations).isEmpty();

        // the facility is usable afterwards: another shape captures and replays
        for (int round = 0; round < 2; round++) {
            List<HostTensor> inputs = request(1, 5);
            assertSameOutputs(graphed.infer(inputs, Set.of(), context(serving)), eager(inputs, serving));
        }
        assertThat(graphs.metrics().captures()).isEqualTo(1);
        assertThat(graphs.metrics().hits()).isEqualTo(1);
    }

    @Test
    void aWarmUpFailingMidwayCountsAFailureBeginsNoCaptureAndGivesItsScratchBack() {
        openGraphs(null);
        capture.failNextWarmUp = true;
        List<HostTensor> inputs = request(2, 12);
        assertSameOutputs(graphed.infer(inputs, Set.of(), context(serving)), eager(inputs, serving));

        assertThat(graphs.metrics().failures()).isEqualTo(1);
        assertThat(capture.begun).as("no capture after a failed warm-up").hasValue(0);
        assertThat(pool.metrics().allocatedBytes()).isZero();
        assertThat(guarded.violations).isEmpty();
    }

    @Test
    void aFailedShapeIsTriedAgainOnlyAfterManyMoreMissesAndThenReplays() {
        openGraphs(null);
        capture.failNext = FailAt.END;
        for (int i = 0; i < GraphCache.RETRY_AFTER_MISSES; i++) {
            List<HostTensor> inputs = request(2, 12);
            assertSameOutputs(graphed.infer(inputs, Set.of(), context(serving)), eager(inputs, serving));
        }
        assertThat(capture.begun).as("no second attempt within the retry spacing").hasValue(1);

        List<HostTensor> inputs = request(2, 12);
        assertSameOutputs(graphed.infer(inputs, Set.of(), context(serving)), eager(inputs, serving));
        assertThat(capture.begun).as("the second attempt").hasValue(2);
        assertThat(graphs.metrics().captures()).isEqualTo(1);
        List<HostTensor> again = request(2, 12);
        assertSameOutputs(graphed.infer(again, Set.of(), context(serving)), eager(again, serving));
        assertThat(graphs.metrics().hits()).isEqualTo(1);
        assertThat(graphs.metrics().failures()).isEqualTo(1);
    }

    @Test
    void aShapeThatKeepsFailingIsGivenUpAfterAFewAttempts() {
        openGraphs(null);
        capture.failAlways = FailAt.BODY;
        int requests = (GraphCache.CAPTURE_ATTEMPTS + 1) * GraphCache.RETRY_AFTER_MISSES + 10;
        for (int i = 0; i < requests; i++) {
            List<HostTensor> inputs = request(1, 5);
            assertSameOutputs(graphed.infer(inputs, Set.of(), context(serving)), eager(inputs, serving));
        }
        assertThat(capture.begun).as("attempts in %d requests", requests).hasValue(GraphCache.CAPTURE_ATTEMPTS);
        assertThat(graphs.metrics().failures()).isEqualTo(GraphCache.CAPTURE_ATTEMPTS);
        assertThat(capture.capturing()).isFalse();
        assertThat(pool.metrics().allocatedBytes()).isZero();
        assertThat(guarded.violations).isEmpty();
    }

    @Test
    void retuningForgetsFailedShapesAndTheNextCaptureOfThemSucceeds() {
        openGraphs(null);
        capture.failNext = FailAt.BODY;
        graphed.infer(request(2, 12), Set.of(), context(serving));
        assertThat(graphs.metrics().failures()).isEqualTo(1);

        graphs.tune(graphs.limits());
        for (int round = 0; round < 2; round++) {
            List<HostTensor> inputs = request(2, 12);
            assertSameOutputs(graphed.infer(inputs, Set.of(), context(serving)), eager(inputs, serving));
        }
        assertThat(graphs.metrics().captures()).isEqualTo(1);
        assertThat(graphs.metrics().hits()).isEqualTo(1);
        assertThat(pool.metrics().allocatedBytes()).isEqualTo(graphs.metrics().bytes());
    }

    @Test
    void requestsOfEveryShapeAreAnsweredRightWhileACaptureIsInProgressAndHitItsGraphAfterwards() throws Exception {
        GraphCacheMetrics m = requestsUnderLoadWhileTheFirstCaptureIsHeld(null);
        assertThat(m.failures()).isZero();
        assertThat(m.captures()).isEqualTo(3);
        assertThat(m.hits()).as("every later request replays").isEqualTo(3 * 4);
    }

    @Test
    void aCaptureThatFailsUnderLoadCostsOnlyItsOwnShapesGraph() throws Exception {
        GraphCacheMetrics m = requestsUnderLoadWhileTheFirstCaptureIsHeld(FailAt.BODY);
        assertThat(m.failures()).isEqualTo(1);
        assertThat(m.captures()).as("the other two shapes").isEqualTo(2);
        assertThat(m.hits()).isEqualTo(2 * 4);
        assertThat(capture.begun).as("the failed shape was not retried under load").hasValue(3);
    }

    /**
     * Holds the first capture (2x16) in its body; meanwhile four threads, each on its own stream, send
     * 40 requests of three shapes, which must all be answered (eagerly, right) before the capture is
     * let go. Then waits for the queued captures and sends each shape again on each stream.
     */
    private GraphCacheMetrics requestsUnderLoadWhileTheFirstCaptureIsHeld(FailAt failure) throws Exception {
        ThreadPoolExecutor captureThread = new ThreadPoolExecutor(1, 1, 0, TimeUnit.SECONDS,
                new ArrayBlockingQueue<>(DeviceGraphs.QUEUE));
        openGraphs(captureThread);
        CountDownLatch hold = new CountDownLatch(1);
        capture.holdBody = hold;
        capture.failNext = failure;
        int[][] shapes = {{2, 12}, {1, 5}, {4, 20}};

        graphed.infer(request(2, 12), Set.of(), context(serving));
        assertThat(capture.bodyReached.await(10, TimeUnit.SECONDS)).as("the capture reached its body").isTrue();

        ExecutorService clients = Executors.newFixedThreadPool(4);
        List<DeviceStream> streams = new ArrayList<>();
        Queue<String> wrong = new ConcurrentLinkedQueue<>();
        try {
            List<Future<?>> load = new ArrayList<>();
            for (int t = 0; t < 4; t++) {
                DeviceStream stream = bench.device.createStream(10 + t);
                streams.add(stream);
                long seed = t;
                load.add(clients.submit(() -> send(stream, shapes, 10, new Random(seed), wrong)));
            }
            for (Future<?> f : load) {
                f.get(20, TimeUnit.SECONDS); // answered while the capture is still held
            }
            assertThat(capture.capturing()).as("the first capture is still in progress").isTrue();
            assertThat(wrong).isEmpty();

            hold.countDown();
            capture.holdBody = null;
            awaitTrue(() -> graphs.metrics().captures() + graphs.metrics().failures() == shapes.length,
                    "the three captures to finish");
            assertThat(capture.capturing()).isFalse();

            for (DeviceStream stream : streams) {
                send(stream, shapes, 1, new Random(7), wrong); // one at a time: each finds its graph idle
            }
            assertThat(wrong).isEmpty();
            assertThat(guarded.violations).isEmpty();
            assertThat(pool.metrics().allocatedBytes()).isEqualTo(graphs.metrics().bytes());
        } finally {
            hold.countDown();
            clients.shutdown();
            assertThat(clients.awaitTermination(10, TimeUnit.SECONDS)).isTrue();
            streams.forEach(DeviceStream::close);
        }
        GraphCacheMetrics metrics = graphs.metrics();
        bench.closeGraphs();
        assertThat(pool.metrics().allocatedBytes()).as("the pool drains to 0 once the graphs are closed").isZero();
        assertThat(capture.liveGraphs).hasValue(0);
        return metrics;
    }

    private void send(DeviceStream stream, int[][] shapes, int rounds, Random random, Queue<String> wrong) {
        for (int round = 0; round < rounds; round++) {
            for (int[] shape : shapes) {
                List<HostTensor> inputs = request(shape[0], shape[1], random);
                List<HostTensor> got = graphed.infer(inputs, Set.of(), context(stream));
                List<HostTensor> expected = eager(inputs, stream);
                for (int i = 0; i < expected.size(); i++) {
                    if (!java.util.Arrays.equals(floats(got.get(i)), floats(expected.get(i)))) {
                        wrong.add(shape[0] + "x" + shape[1] + " " + expected.get(i).name());
                    }
                }
            }
        }
    }

    private List<HostTensor> eager(List<HostTensor> inputs, DeviceStream stream) {
        return bench.bert.infer(inputs, Set.of(), new ExecutionContext(stream, pool, bench.ops));
    }

    private static void awaitTrue(BooleanSupplier condition, String what) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (!condition.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError("timed out after 10 s waiting for " + what);
            }
            Thread.sleep(5);
        }
    }

    /**
     * The pool, refusing (and noting) what must never happen: a block on the capture stream, or an
     * allocation by the capturing thread while it captures.
     */
    private static final class CaptureGuard implements DeviceAllocator {
        private final DeviceAllocator pool;
        private final RecordingGraphCapture capture;
        final Queue<String> violations = new ConcurrentLinkedQueue<>();

        CaptureGuard(DeviceAllocator pool, RecordingGraphCapture capture) {
            this.pool = pool;
            this.capture = capture;
        }

        @Override
        public DeviceBlock allocate(long bytes, AllocationStream stream) {
            if (stream == capture.stream()) {
                violations.add(bytes + " bytes on the capture stream");
                throw new IllegalStateException("a pool block on the capture stream");
            }
            if (capture.capturingThread == Thread.currentThread()) {
                violations.add(bytes + " bytes while capturing");
                throw new IllegalStateException("a pool allocation while capturing");
            }
            return pool.allocate(bytes, stream);
        }

        @Override
        public AllocatorMode mode() {
            return pool.mode();
        }

        @Override
        public AllocatorMetrics metrics() {
            return pool.metrics();
        }

        @Override
        public void close() {
        }
    }

    // ---- requests -----------------------------------------------------------------------------

    private List<HostTensor> request(int batch, int seq) {
        return requests.inputs(batch, seq);
    }

    private static List<HostTensor> request(int batch, int seq, Random random) {
        return new TinyBertRequests(random, TinyBertRequests.TokenTypes.HALVES).inputs(batch, seq);
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
