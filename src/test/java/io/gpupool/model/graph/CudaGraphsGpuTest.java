package io.gpupool.model.graph;

import io.gpupool.backend.DeviceStream;
import io.gpupool.kernels.cuda.CudaTensorOps;
import io.gpupool.kernels.cuda.Precision;
import io.gpupool.model.ExecutionContext;
import io.gpupool.model.HostTensor;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.function.LongSupplier;
import java.util.function.UnaryOperator;

import static io.gpupool.model.testing.Fixtures.floats;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * CUDA graphs on the GPU: the tiny BERT captured on the device's capture thread and stream, replayed
 * on serving streams, against eager runs of the same kernels; and the pool's numbers before and after.
 */
@Tag("gpu")
class CudaGraphsGpuTest {

    private static final ShapeBuckets BUCKETS = new ShapeBuckets(List.of(1, 2, 4, 8), List.of(8, 16, 32, 64));
    private static final int STREAMS = CudaGraphBench.STREAMS;

    private CudaGraphBench bench;

    @BeforeEach
    void setUp() {
        bench = CudaGraphBench.openOrSkip((device, pool) -> new CudaTensorOps(device, Precision.FP32),
                UnaryOperator.identity(), new GraphLimits(true, 16, 1L << 30), BUCKETS);
    }

    @AfterEach
    void tearDown() {
        if (bench != null) {
            bench.close();
        }
    }

    @Test
    void replaysEqualEagerRunsAndGraphMemoryIsPoolMemoryUntilUnload() throws Exception {
        ExecutionContext context = bench.context(bench.streams.getFirst());
        Random random = new Random(5);
        int[][] shapes = {{1, 5}, {2, 16}, {3, 30}, {8, 64}};
        for (int i = 0; i < shapes.length; i++) {
            int[] shape = shapes[i];
            for (int round = 0; round < 3; round++) {
                List<HostTensor> inputs = request(random, shape[0], shape[1]);
                assertSameOutputs(bench.graphed.infer(inputs, Set.of(), context),
                        bench.bert.infer(inputs, Set.of(), context));
                long expected = i + 1;
                awaitAtLeast(() -> bench.graphs.metrics().captures() + bench.graphs.metrics().failures(), expected);
            }
        }
        GraphCacheMetrics m = bench.graphs.metrics();
        assertThat(m.failures()).isZero();
        assertThat(m.captures()).isEqualTo(shapes.length);
        assertThat(m.hits()).isEqualTo(2L * shapes.length);
        assertThat(m.bytes()).isPositive();
        assertThat(bench.pool.metrics().allocatedBytes()).isEqualTo(m.bytes());

        bench.assertUnloadFreesTheGraphsAndTheirPoolMemory();
    }

    @Test
    void requestsOnFourStreamsAtOnceShareTheGraphsAndGetTheirOwnOutputs() throws Exception {
        ExecutorService threads = Executors.newFixedThreadPool(STREAMS);
        try {
            List<Future<Integer>> done = new ArrayList<>();
            for (int t = 0; t < STREAMS; t++) {
                DeviceStream stream = bench.streams.get(t);
                int seed = t;
                done.add(threads.submit(() -> {
                    bench.device.bindToCurrentThread();
                    ExecutionContext context = bench.context(stream);
                    Random random = new Random(seed);
                    for (int i = 0; i < 40; i++) {
                        List<HostTensor> inputs = request(random, 1 + random.nextInt(4), 9 + random.nextInt(24));
                        assertSameOutputs(bench.graphed.infer(inputs, Set.of(), context),
                        bench.bert.infer(inputs, Set.of(), context));
                    }
                    return 40;
                }));
            }
            for (Future<Integer> f : done) {
                assertThat(f.get()).isEqualTo(40);
            }
        } finally {
            threads.shutdown();
        }
        GraphCacheMetrics m = bench.graphs.metrics();
        assertThat(m.failures()).isZero();
        assertThat(m.hits()).isPositive();
        assertThat(m.hits() + m.misses()).isEqualTo(4L * 40);
        assertThat(bench.pool.metrics().allocatedBytes()).isEqualTo(m.bytes());
    }

    private static void awaitAtLeast(LongSupplier value, long expected) throws InterruptedException {
        CudaGraphBench.awaitAtLeast(value, expected);
    }

    private static List<HostTensor> request(Random random, int batch, int seq) {
        return new TinyBertRequests(random, TinyBertRequests.TokenTypes.RANDOM).inputs(batch, seq);
    }

    /** The same kernels on the same rows: padding and replay change no bit on the GPU either (tolerance for safety). */
    private static void assertSameOutputs(List<HostTensor> actual, List<HostTensor> expected) {
        assertThat(actual).hasSameSizeAs(expected);
        for (int i = 0; i < expected.size(); i++) {
            assertThat(actual.get(i).shape()).containsExactly(expected.get(i).shape());
            float[] a = floats(actual.get(i));
            float[] e = floats(expected.get(i));
            double worst = 0;
            for (int k = 0; k < e.length; k++) {
                worst = Math.max(worst, Math.abs(a[k] - e[k]));
            }
            assertThat(worst).as(expected.get(i).name()).isLessThanOrEqualTo(1e-5);
        }
    }
}
