package io.gpupool.model.graph;

import io.gpupool.backend.DeviceStream;
import io.gpupool.kernels.TensorOps;
import io.gpupool.kernels.cuda.CudaTensorOps;
import io.gpupool.kernels.cuda.Precision;
import io.gpupool.kernels.cuda.KernelOptions;
import io.gpupool.model.BatchPadding;
import io.gpupool.model.BatchableModel;
import io.gpupool.model.BatchableModel.Member;
import io.gpupool.model.ExecutionContext;
import io.gpupool.model.HostTensor;
import io.gpupool.model.InferenceModel;
import io.gpupool.model.graph.GraphedBatchChecks.Request;
import io.gpupool.model.testing.WithoutPackedOps;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;
import java.util.function.LongSupplier;
import java.util.function.Predicate;
import java.util.function.UnaryOperator;

import static io.gpupool.model.testing.Fixtures.floats;
import static io.gpupool.model.testing.Fixtures.maxAbsDiff;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * CUDA graphs of batches on the GPU: the tiny BERT's packed batches captured per token bucket (packed.cu's kernels
 * at the bucket's sequences and tokens, the padding empty sequences and a tail in no sequence), and its padded-layout
 * batches replaying the graph of their request bucket (BF16's default layout; FP32 planned without packed ops to hold
 * members to themselves alone), captured on the device's capture thread and replayed on serving streams, against
 * each member alone and the eager batch; replays counted, no capture failing, and the pool drained once graphs, ops
 * and model are closed.
 */
@Tag("gpu")
class CudaBatchGraphsGpuTest {

    private static final ShapeBuckets BUCKETS = new ShapeBuckets(List.of(1, 2, 4, 8, 16), List.of(8, 16, 32, 64),
            List.of(16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512));
    private static final int STREAMS = CudaGraphBench.STREAMS;

    private CudaGraphBench bench;
    private BatchableModel bert;
    private BatchableModel graphed;

    /** The tiny BERT on {@code precision}: own kernels where {@code library} is false, else cuBLASLt (BF16 packed). */
    private void open(Precision precision, boolean library) {
        open(precision, library, "packed");
    }

    /**
     * The tiny BERT on {@code precision} whose batches take {@code layout}: "packed" as above; "padded" with cuBLASLt
     * as production runs BF16 (packed-bf16 off), and planned without packed ops where the kernels have them (FP32).
     */
    private void open(Precision precision, boolean library, String layout) {
        UnaryOperator<TensorOps> planning = layout.equals("padded") ? WithoutPackedOps::over : UnaryOperator.identity();
        bench = CudaGraphBench.openOrSkip((device, pool) -> library
                        ? new CudaTensorOps(device, precision, CudaGraphBench.cublasLt(device), pool,
                                new KernelOptions(layout.equals("packed"), false,
                                        KernelOptions.DEFAULT.warpLayerNorm()))
                        : new CudaTensorOps(device, precision),
                planning, new GraphLimits(true, 64, 1L << 30), BUCKETS);
        bert = (BatchableModel) bench.bert;
        graphed = (BatchableModel) bench.graphed;
        assertThat(bert.batchLayout()).isEqualTo(layout);
    }

    @AfterEach
    void tearDown() {
        if (bench != null) {
            bench.close();
        }
    }

    @Test
    void fp32BatchesReplayTheirBucketsGraphAndEachMemberGetsWhatItGetsAlone() throws Exception {
        open(Precision.FP32, false);
        ExecutionContext context = bench.context(bench.streams.getFirst());
        Random random = new Random(16);
        List<List<Request>> buckets = List.of(
                List.of(request(random, 2, 5), request(random, 1, 7)),                        // 3 seq, 17 tok -> (4, 24)
                List.of(request(random, 1, 9), request(random, 1, 9), request(random, 1, 3)), // 3, 21 -> (4, 24)
                List.of(request(random, 3, 8)),          // 3, 24 -> (4, 24): an empty sequence at T' (CLS reads no row)
                List.of(request(random, 4, 30), request(random, 2, 64), request(random, 1, 1)), // 7, 249 -> (8, 256)
                List.of(request(random, 1, 64)));                                               // 1, 64 -> (1, 64)
        int[] keysAfter = {1, 1, 1, 2, 3};                 // the second and third share the first one's bucket
        for (int b = 0; b < buckets.size(); b++) {
            for (int round = 0; round < 3; round++) {
                assertEachMemberGetsWhatItGetsAlone(buckets.get(b), context, 1e-5);
                int keys = keysAfter[b];
                awaitAtLeast(() -> bench.graphs.metrics().captures() + bench.graphs.metrics().failures(), keys);
            }
        }
        GraphCacheMetrics m = bench.graphs.metrics();
        assertThat(m.failures()).isZero();
        assertThat(m.captures()).isEqualTo(3);
        assertThat(m.misses()).isEqualTo(3);
        assertThat(m.hits()).as("replays: every run but each bucket's first").isEqualTo(5L * 3 - 3);
        assertThat(bench.pool.metrics().allocatedBytes()).as("the graphs' blocks only").isEqualTo(m.bytes());

        bench.assertUnloadFreesTheGraphsAndTheirPoolMemory();
    }

    /** FP32 on cuBLASLt, and BF16 packed on bf16 activations (packed-bf16): against the eager batch, same stream. */
    @ParameterizedTest
    @ValueSource(strings = {"FP32", "BF16"})
    void concurrentBatchesOnFourStreamsWithGraphsOnEqualTheEagerBatchAndNoCaptureFails(String precision)
            throws Exception {
        open(Precision.valueOf(precision), true);
        double tolerance = precision.equals("BF16") ? 5e-2 : 1e-4;
        GraphCacheMetrics m = sendBatchesOnFourStreamsAgainstEager(precision, tolerance, 0,
                random -> randomBatch(random, 8, 4, 48), prepared -> true,
                prepared -> BUCKETS.packedBucket(BatchPadding.Shape.of(prepared)) != null);
        assertThat(bench.pool.metrics().allocatedBytes()).as("the graphs' blocks and the streams' workspaces")
                .isGreaterThanOrEqualTo(m.bytes());
    }

    /**
     * FP32 padded-layout batches of different sizes in one request bucket replay its graph, as does a request of that
     * bucket; each member within 1e-5 of itself alone (own kernels: padding changes no bit of a row's products).
     */
    @Test
    void fp32PaddedBatchesReplayTheirRequestBucketsGraphAndEachMemberGetsWhatItGetsAlone() throws Exception {
        open(Precision.FP32, false, "padded");
        ExecutionContext context = bench.context(bench.streams.getFirst());
        Random random = new Random(18);
        List<List<Request>> buckets = List.of(
                List.of(request(random, 2, 5), request(random, 3, 12)),                       // 5 rows, 12 -> 8 x 16
                List.of(request(random, 1, 16), request(random, 4, 3), request(random, 1, 1)), // 6, 16 -> 8 x 16
                List.of(request(random, 8, 10), request(random, 2, 9)),      // 10 rows > max batch 8 -> 16 x 16
                List.of(request(random, 1, 40), request(random, 2, 33)));    // 3, 40 -> 4 x 64
        int[] keysAfter = {1, 1, 2, 3};
        for (int b = 0; b < buckets.size(); b++) {
            for (int round = 0; round < 3; round++) {
                assertEachMemberGetsWhatItGetsAlone(buckets.get(b), context, 1e-5);
                awaitAtLeast(() -> bench.graphs.metrics().captures() + bench.graphs.metrics().failures(),
                        keysAfter[b]);
            }
        }
        List<HostTensor> request = request(random, 7, 14).inputs();           // 8 x 16: the batches' graph
        List<HostTensor> replayed = ((InferenceModel) graphed).infer(request, Set.of(), context);
        assertThat(maxDifference(replayed, bert.infer(request, Set.of(), context))).isLessThanOrEqualTo(1e-5);

        GraphCacheMetrics m = bench.graphs.metrics();
        assertThat(m.failures()).isZero();
        assertThat(m.captures()).isEqualTo(3);
        assertThat(m.misses()).isEqualTo(3);
        assertThat(m.hits()).as("replays: every batch but each bucket's first, and the request")
                .isEqualTo(4L * 3 - 3 + 1);
        assertThat(bench.pool.metrics().allocatedBytes()).as("the graphs' blocks only").isEqualTo(m.bytes());

        bench.assertUnloadFreesTheGraphsAndTheirPoolMemory();
    }

    /**
     * BF16 on cuBLASLt without packed-bf16, production's short-request configuration: padded-layout batches on four
     * streams with graphs on against the eager batch (5e-2), FP32 likewise (1e-4); no capture or replay failing.
     */
    @ParameterizedTest
    @ValueSource(strings = {"FP32", "BF16"})
    void concurrentPaddedBatchesOnFourStreamsWithGraphsOnEqualTheEagerBatch(String precision) throws Exception {
        open(Precision.valueOf(precision), true, "padded");
        double tolerance = precision.equals("BF16") ? 5e-2 : 1e-4;
        sendBatchesOnFourStreamsAgainstEager(precision, tolerance, 100, random -> randomBatch(random, 5, 3, 40),
                bert::fitsOneForward, CudaBatchGraphsGpuTest::inRequestBucket);
    }

    /** Whether a padded-layout batch has a request bucket whose cells fit tiny-bert's (8 x 64); no mask hides a row. */
    private static boolean inRequestBucket(List<Member> members) {
        int rows = 0;
        int longest = 0;
        for (Member m : members) {
            rows += m.rows();
            longest = Math.max(longest, m.sequenceLength());
        }
        int rowBucket = BUCKETS.batchBucket(rows, Integer.MAX_VALUE);
        int sequenceBucket = BUCKETS.sequenceBucket(longest, 64);
        return rowBucket != 0 && sequenceBucket != 0 && rowBucket * sequenceBucket <= 8 * 64;
    }

    // ---- helpers ------------------------------------------------------------------------------

    /**
     * Sends 40 batches per stream on the four streams at once, each through the graphed model and then eagerly on
     * the same stream: {@code draw} makes each batch from its stream's random numbers (seeded {@code firstSeed} plus
     * the stream's index), {@code sent} picks the batches that are sent, {@code bucketed} those within the buckets.
     * Asserts each stream's worst difference within {@code tolerance}; once the captures are done, that none of them
     * nor any replay failed, some batches replayed, every bucketed batch was looked up once and no stream is left
     * capturing. Returns the cache's numbers.
     */
    private GraphCacheMetrics sendBatchesOnFourStreamsAgainstEager(String precision, double tolerance, int firstSeed,
                                                                   Function<Random, List<Request>> draw,
                                                                   Predicate<List<Member>> sent,
                                                                   Predicate<List<Member>> bucketed)
            throws Exception {
        int batchesPerStream = 40;
        ExecutorService threads = Executors.newFixedThreadPool(STREAMS);
        long inBuckets = 0;
        try {
            List<Future<long[]>> done = new ArrayList<>();
            for (int t = 0; t < STREAMS; t++) {
                DeviceStream stream = bench.streams.get(t);
                int seed = firstSeed + t;
                done.add(threads.submit(() -> {
                    bench.device.bindToCurrentThread();
                    ExecutionContext context = bench.context(stream);
                    Random random = new Random(seed);
                    long inBucket = 0;
                    double worst = 0;
                    for (int i = 0; i < batchesPerStream; i++) {
                        List<Member> prepared = members(draw.apply(random));
                        if (!sent.test(prepared)) {
                            continue;
                        }
                        if (bucketed.test(prepared)) {
                            inBucket++;
                        }
                        List<List<HostTensor>> replayed = graphed.inferBatch(prepared, context);
                        List<List<HostTensor>> eager = bert.inferBatch(prepared, context);
                        for (int r = 0; r < eager.size(); r++) {
                            worst = Math.max(worst, maxDifference(replayed.get(r), eager.get(r)));
                        }
                    }
                    return new long[] {inBucket, Double.doubleToLongBits(worst)};
                }));
            }
            for (Future<long[]> f : done) {
                long[] result = f.get(120, TimeUnit.SECONDS);
                inBuckets += result[0];
                assertThat(Double.longBitsToDouble(result[1])).as("graph against eager, %s", precision)
                        .isLessThanOrEqualTo(tolerance);
            }
        } finally {
            threads.shutdown();
        }
        assertThat(bench.graphs.awaitIdle(java.time.Duration.ofSeconds(30))).isTrue();
        GraphCacheMetrics m = bench.graphs.metrics();
        assertThat(m.failures()).as("captures and replays failed").isZero();
        assertThat(m.hits()).as("replays").isPositive();
        assertThat(m.hits() + m.misses()).as("every batch within the buckets looked up once").isEqualTo(inBuckets);
        assertThat(bench.graphs.capturing()).as("no stream left capturing").isFalse();
        return m;
    }

    /** 1 to {@code members} requests, each of 1 to {@code rows} sequences of 1 to {@code seq} tokens. */
    private static List<Request> randomBatch(Random random, int members, int rows, int seq) {
        List<Request> batch = new ArrayList<>();
        int count = 1 + random.nextInt(members);
        for (int r = 0; r < count; r++) {
            batch.add(request(random, 1 + random.nextInt(rows), 1 + random.nextInt(seq)));
        }
        return batch;
    }

    private void assertEachMemberGetsWhatItGetsAlone(List<Request> batch, ExecutionContext context, double tolerance) {
        List<List<HostTensor>> together = graphed.inferBatch(members(batch), context);
        assertThat(together).hasSameSizeAs(batch);
        for (int i = 0; i < batch.size(); i++) {
            List<HostTensor> alone = bert.infer(batch.get(i).inputs(), batch.get(i).outputs(), context);
            assertThat(together.get(i)).extracting(HostTensor::name)
                    .containsExactlyElementsOf(alone.stream().map(HostTensor::name).toList());
            assertThat(maxDifference(together.get(i), alone)).as("member %d", i).isLessThanOrEqualTo(tolerance);
        }
    }

    private List<Member> members(List<Request> batch) {
        List<Member> members = new ArrayList<>();
        for (Request r : batch) {
            members.add(graphed.prepare(r.inputs(), r.outputs()));
        }
        return members;
    }

    private static double maxDifference(List<HostTensor> actual, List<HostTensor> expected) {
        assertThat(actual).hasSameSizeAs(expected);
        double worst = 0;
        for (int i = 0; i < expected.size(); i++) {
            assertThat(actual.get(i).shape()).containsExactly(expected.get(i).shape());
            worst = Math.max(worst, maxAbsDiff(floats(actual.get(i)), floats(expected.get(i))));
        }
        return worst;
    }

    private static void awaitAtLeast(LongSupplier value, long expected) throws InterruptedException {
        CudaGraphBench.awaitAtLeast(value, expected);
    }

    private static Request request(Random random, int batch, int seq) {
        return new Request(new TinyBertRequests(random, TinyBertRequests.TokenTypes.RANDOM).inputs(batch, seq),
                Set.of());
    }
}
