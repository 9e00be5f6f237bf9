package io.gpupool.model.graph;

import io.gpupool.backend.ComputeDevice;
import io.gpupool.backend.DeviceStream;
import io.gpupool.kernels.cuda.CudaTensorOps;
import io.gpupool.kernels.cuda.Precision;
import io.gpupool.model.ExecutionContext;
import io.gpupool.model.HostTensor;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.function.UnaryOperator;

import static io.gpupool.model.testing.Fixtures.floats;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * CUDA graphs with the cuBLASLt engine under concurrent load, the combination that used to fail: four
 * streams send requests of many shapes at once while their graphs are captured beside them. Every
 * answer must match an eager run of the same request on the same stream, no capture may fail (the
 * capture stream is warmed first and takes no pool memory, each graph has a workspace of its own),
 * no stream may be left capturing, and the pool drains to 0 once ops, graphs and model are closed.
 */
@Tag("gpu")
class CudaGraphsCublasLtGpuTest {

    private static final ShapeBuckets BUCKETS = new ShapeBuckets(List.of(1, 2, 4, 8), List.of(8, 16, 32, 64));
    private static final int STREAMS = CudaGraphBench.STREAMS;
    private static final int REQUESTS = 60;

    private CudaGraphBench bench;

    private ComputeDevice open(Precision precision) {
        bench = CudaGraphBench.openOrSkip(
                (device, pool) -> new CudaTensorOps(device, precision, CudaGraphBench.cublasLt(device), pool),
                UnaryOperator.identity(), new GraphLimits(true, 64, 1L << 30), BUCKETS);
        return bench.device;
    }

    @AfterEach
    void tearDown() {
        if (bench != null) {
            bench.close();
        }
    }

    @ParameterizedTest
    @EnumSource(value = Precision.class, names = {"FP32", "BF16"})
    void concurrentRequestsOfManyShapesWithGraphsOnEqualEagerAndNoCaptureFails(Precision precision) throws Exception {
        ComputeDevice device = open(precision);
        double tolerance = precision == Precision.BF16 ? 5e-2 : 1e-4;
        ExecutorService threads = Executors.newFixedThreadPool(STREAMS);
        try {
            List<Future<Double>> done = new ArrayList<>();
            for (int t = 0; t < STREAMS; t++) {
                DeviceStream stream = bench.streams.get(t);
                int seed = t;
                done.add(threads.submit(() -> {
                    device.bindToCurrentThread();
                    ExecutionContext context = bench.context(stream);
                    Random random = new Random(seed);
                    double worst = 0;
                    for (int i = 0; i < REQUESTS; i++) {
                        List<HostTensor> inputs = request(random, 1 + random.nextInt(8), 1 + random.nextInt(64));
                        worst = Math.max(worst, maxDifference(bench.graphed.infer(inputs, Set.of(), context),
                                bench.bert.infer(inputs, Set.of(), context)));
                    }
                    return worst;
                }));
            }
            for (Future<Double> f : done) {
                assertThat(f.get(120, TimeUnit.SECONDS)).as("graph against eager, %s", precision)
                        .isLessThanOrEqualTo(tolerance);
            }
        } finally {
            threads.shutdown();
        }
        assertThat(bench.graphs.awaitIdle(Duration.ofSeconds(60))).as("the queued captures finished").isTrue();
        GraphCacheMetrics m = bench.graphs.metrics();
        System.out.printf("graphs under load, %s: %d captures, %d hits, %d misses, %d failures, %d bytes%n",
                precision, m.captures(), m.hits(), m.misses(), m.failures(), m.bytes());
        assertThat(m.failures()).as("captures or replays that failed").isZero();
        assertThat(m.captures()).isPositive();
        assertThat(m.hits()).isPositive();
        assertThat(bench.graphs.capturing()).as("no stream left capturing").isFalse();
    }

    private static double maxDifference(List<HostTensor> actual, List<HostTensor> expected) {
        assertThat(actual).hasSameSizeAs(expected);
        double worst = 0;
        for (int i = 0; i < expected.size(); i++) {
            assertThat(actual.get(i).shape()).containsExactly(expected.get(i).shape());
            float[] a = floats(actual.get(i));
            float[] e = floats(expected.get(i));
            for (int k = 0; k < e.length; k++) {
                worst = Math.max(worst, Math.abs(a[k] - e[k]));
            }
        }
        return worst;
    }

    private static List<HostTensor> request(Random random, int batch, int seq) {
        return new TinyBertRequests(random, TinyBertRequests.TokenTypes.RANDOM).inputs(batch, seq);
    }
}
