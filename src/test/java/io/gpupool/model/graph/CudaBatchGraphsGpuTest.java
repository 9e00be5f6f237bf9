package io.gpupool.model.graph;

import io.gpupool.backend.ComputeDevice;
import io.gpupool.backend.DeviceStream;
import io.gpupool.backend.MatmulLibrary;
import io.gpupool.backend.cuda.CudaBackend;
import io.gpupool.kernels.TensorOps;
import io.gpupool.kernels.cuda.CudaTensorOps;
import io.gpupool.memory.DeviceAllocator;
import io.gpupool.memory.PoolConfig;
import io.gpupool.memory.metric.AllocatorMode;
import io.gpupool.memory.pool.DevicePool;
import io.gpupool.model.BatchPadding;
import io.gpupool.model.BatchableModel;
import io.gpupool.model.BatchableModel.Member;
import io.gpupool.model.DataType;
import io.gpupool.model.ExecutionContext;
import io.gpupool.model.HostTensor;
import io.gpupool.model.InferenceModel;
import io.gpupool.model.LoadTarget;
import io.gpupool.model.repository.ModelRepository;
import io.gpupool.model.testing.WithoutPackedOps;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.function.LongSupplier;

import static io.gpupool.model.testing.Fixtures.fixture;
import static io.gpupool.model.testing.Fixtures.floats;
import static io.gpupool.model.testing.Fixtures.maxAbsDiff;
import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

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
    private static final int STREAMS = 4;

    private CudaBackend cuda;
    private ComputeDevice device;
    private DevicePool pool;
    private DeviceAllocator weights;
    private CudaTensorOps ops;
    private final List<DeviceStream> streams = new ArrayList<>();
    private BatchableModel bert;
    private DeviceGraphs graphs;
    private BatchableModel graphed;

    /** The tiny BERT on {@code precision}: own kernels where {@code library} is false, else cuBLASLt (BF16 packed). */
    private void open(CudaTensorOps.Precision precision, boolean library) {
        open(precision, library, "packed");
    }

    /**
     * The tiny BERT on {@code precision} whose batches take {@code layout}: "packed" as above; "padded" with cuBLASLt
     * as production runs BF16 (packed-bf16 off), and planned without packed ops where the kernels have them (FP32).
     */
    private void open(CudaTensorOps.Precision precision, boolean library, String layout) {
        Optional<CudaBackend> created = CudaBackend.tryCreate();
        assumeTrue(created.isPresent(), "no CUDA driver or device");
        cuda = created.get();
        device = cuda.devices().getFirst();
        device.bindToCurrentThread();
        pool = new DevicePool(device.chunkSource(), PoolConfig.defaults());
        weights = device.nativeAllocator(AllocatorMode.DIRECT).orElseThrow();
        if (library) {
            MatmulLibrary lt = device.matmulLibrary(null).orElseThrow(() ->
                    new AssertionError("cuBLASLt could not be loaded on this GPU machine"));
            ops = new CudaTensorOps(device, precision, lt, pool, new CudaTensorOps.Options(layout.equals("packed"),
                    false, CudaTensorOps.Options.DEFAULT.warpLayerNorm()));
        } else {
            ops = new CudaTensorOps(device, precision);
        }
        for (int i = 0; i < STREAMS; i++) {
            streams.add(device.createStream(i));
        }
        TensorOps planning = layout.equals("padded") ? WithoutPackedOps.over(ops) : ops;
        bert = (BatchableModel) ModelRepository.loadModel("tiny-bert", fixture("tiny-bert"),
                new LoadTarget(streams.getFirst(), weights, planning));
        assertThat(bert.batchLayout()).isEqualTo(layout);
        graphs = DeviceGraphs.open(device, pool, new GraphLimits(true, 64, 1L << 30), BUCKETS, STREAMS).orElseThrow();
        graphed = (BatchableModel) graphs.wrap(bert);
    }

    @AfterEach
    void tearDown() {
        if (cuda == null) {
            return;
        }
        try {
            ((InferenceModel) graphed).close();
            graphs.close();
            streams.forEach(DeviceStream::synchronize);
            ops.close();
            streams.forEach(DeviceStream::close);
            assertThat(pool.metrics().allocatedBytes()).as("pool bytes after unload and shutdown").isZero();
        } finally {
            pool.close();
            weights.close();
            cuda.close();
        }
    }

    @Test
    void fp32BatchesReplayTheirBucketsGraphAndEachMemberGetsWhatItGetsAlone() throws Exception {
        open(CudaTensorOps.Precision.FP32, false);
        ExecutionContext context = new ExecutionContext(streams.getFirst(), pool, ops);
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
                awaitAtLeast(() -> graphs.metrics().captures() + graphs.metrics().failures(), keys);
            }
        }
        GraphCacheMetrics m = graphs.metrics();
        assertThat(m.failures()).isZero();
        assertThat(m.captures()).isEqualTo(3);
        assertThat(m.misses()).isEqualTo(3);
        assertThat(m.hits()).as("replays: every run but each bucket's first").isEqualTo(5L * 3 - 3);
        assertThat(pool.metrics().allocatedBytes()).as("the graphs' blocks only").isEqualTo(m.bytes());

        ((InferenceModel) graphed).close();
        assertThat(graphs.metrics().graphs()).isZero();
        assertThat(pool.metrics().allocatedBytes()).isZero();
    }

    /** FP32 on cuBLASLt, and BF16 packed on bf16 activations (packed-bf16): against the eager batch, same stream. */
    @ParameterizedTest
    @ValueSource(strings = {"FP32", "BF16"})
    void concurrentBatchesOnFourStreamsWithGraphsOnEqualTheEagerBatchAndNoCaptureFails(String precision)
            throws Exception {
        open(CudaTensorOps.Precision.valueOf(precision), true);
        double tolerance = precision.equals("BF16") ? 5e-2 : 1e-4;
        int batchesPerStream = 40;
        ExecutorService threads = Executors.newFixedThreadPool(STREAMS);
        long inBuckets = 0;
        try {
            List<Future<long[]>> done = new ArrayList<>();
            for (int t = 0; t < STREAMS; t++) {
                DeviceStream stream = streams.get(t);
                int seed = t;
                done.add(threads.submit(() -> {
                    device.bindToCurrentThread();
                    ExecutionContext context = new ExecutionContext(stream, pool, ops);
                    Random random = new Random(seed);
                    long bucketed = 0;
                    double worst = 0;
                    for (int i = 0; i < batchesPerStream; i++) {
                        List<Request> batch = new ArrayList<>();
                        int members = 1 + random.nextInt(8);
                        for (int r = 0; r < members; r++) {
                            batch.add(request(random, 1 + random.nextInt(4), 1 + random.nextInt(48)));
                        }
                        List<Member> prepared = members(batch);
                        if (BUCKETS.packedBucket(BatchPadding.Shape.of(prepared)) != null) {
                            bucketed++;
                        }
                        List<List<HostTensor>> replayed = graphed.inferBatch(prepared, context);
                        List<List<HostTensor>> eager = bert.inferBatch(prepared, context);
                        for (int r = 0; r < eager.size(); r++) {
                            worst = Math.max(worst, maxDifference(replayed.get(r), eager.get(r)));
                        }
                    }
                    return new long[] {bucketed, Double.doubleToLongBits(worst)};
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
        assertThat(graphs.awaitIdle(java.time.Duration.ofSeconds(30))).isTrue();
        GraphCacheMetrics m = graphs.metrics();
        assertThat(m.failures()).as("captures and replays failed").isZero();
        assertThat(m.hits()).as("replays").isPositive();
        assertThat(m.hits() + m.misses()).as("every batch within the buckets looked up once").isEqualTo(inBuckets);
        assertThat(graphs.capturing()).as("no stream left capturing").isFalse();
        assertThat(pool.metrics().allocatedBytes()).as("the graphs' blocks and the streams' workspaces")
                .isGreaterThanOrEqualTo(m.bytes());
    }

    /**
     * FP32 padded-layout batches of different sizes in one request bucket replay its graph, as does a request of that
     * bucket; each member within 1e-5 of itself alone (own kernels: padding changes no bit of a row's products).
     */
    @Test
    void fp32PaddedBatchesReplayTheirRequestBucketsGraphAndEachMemberGetsWhatItGetsAlone() throws Exception {
        open(CudaTensorOps.Precision.FP32, false, "padded");
        ExecutionContext context = new ExecutionContext(streams.getFirst(), pool, ops);
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
                awaitAtLeast(() -> graphs.metrics().captures() + graphs.metrics().failures(), keysAfter[b]);
            }
        }
        List<HostTensor> request = request(random, 7, 14).inputs();           // 8 x 16: the batches' graph
        List<HostTensor> replayed = ((InferenceModel) graphed).infer(request, Set.of(), context);
        assertThat(maxDifference(replayed, bert.infer(request, Set.of(), context))).isLessThanOrEqualTo(1e-5);

        GraphCacheMetrics m = graphs.metrics();
        assertThat(m.failures()).isZero();
        assertThat(m.captures()).isEqualTo(3);
        assertThat(m.misses()).isEqualTo(3);
        assertThat(m.hits()).as("replays: every batch but each bucket's first, and the request")
                .isEqualTo(4L * 3 - 3 + 1);
        assertThat(pool.metrics().allocatedBytes()).as("the graphs' blocks only").isEqualTo(m.bytes());

        ((InferenceModel) graphed).close();
        assertThat(graphs.metrics().graphs()).isZero();
        assertThat(pool.metrics().allocatedBytes()).isZero();
    }

    /**
     * BF16 on cuBLASLt without packed-bf16, production's short-request configuration: padded-layout batches on four
     * streams with graphs on against the eager batch (5e-2), FP32 likewise (1e-4); no capture or replay failing.
     */
    @ParameterizedTest
    @ValueSource(strings = {"FP32", "BF16"})
    void concurrentPaddedBatchesOnFourStreamsWithGraphsOnEqualTheEagerBatch(String precision) throws Exception {
        open(CudaTensorOps.Precision.valueOf(precision), true, "padded");
        double tolerance = precision.equals("BF16") ? 5e-2 : 1e-4;
        int batchesPerStream = 40;
        ExecutorService threads = Executors.newFixedThreadPool(STREAMS);
        long inBuckets = 0;
        try {
            List<Future<long[]>> done = new ArrayList<>();
            for (int t = 0; t < STREAMS; t++) {
                DeviceStream stream = streams.get(t);
                int seed = 100 + t;
                done.add(threads.submit(() -> {
                    device.bindToCurrentThread();
                    ExecutionContext context = new ExecutionContext(stream, pool, ops);
                    Random random = new Random(seed);
                    long bucketed = 0;
                    double worst = 0;
                    for (int i = 0; i < batchesPerStream; i++) {
                        List<Request> batch = new ArrayList<>();
                        int members = 1 + random.nextInt(5);
                        for (int r = 0; r < members; r++) {
                            batch.add(request(random, 1 + random.nextInt(3), 1 + random.nextInt(40)));
                        }
                        List<Member> prepared = members(batch);
                        if (!bert.fitsOneForward(prepared)) {
                            continue;
                        }
                        if (inRequestBucket(prepared)) {
                            bucketed++;
                        }
                        List<List<HostTensor>> replayed = graphed.inferBatch(prepared, context);
                        List<List<HostTensor>> eager = bert.inferBatch(prepared, context);
                        for (int r = 0; r < eager.size(); r++) {
                            worst = Math.max(worst, maxDifference(replayed.get(r), eager.get(r)));
                        }
                    }
                    return new long[] {bucketed, Double.doubleToLongBits(worst)};
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
        assertThat(graphs.awaitIdle(java.time.Duration.ofSeconds(30))).isTrue();
        GraphCacheMetrics m = graphs.metrics();
        assertThat(m.failures()).as("captures and replays failed").isZero();
        assertThat(m.hits()).as("replays").isPositive();
        assertThat(m.hits() + m.misses()).as("every batch within the buckets looked up once").isEqualTo(inBuckets);
        assertThat(graphs.capturing()).as("no stream left capturing").isFalse();
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

    private record Request(List<HostTensor> inputs, Set<String> outputs) {
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
        long deadline = System.nanoTime() + 20_000_000_000L;
        while (value.getAsLong() < expected && System.nanoTime() < deadline) {
            Thread.sleep(5);
        }
        assertThat(value.getAsLong()).isGreaterThanOrEqualTo(expected);
    }

    private static Request request(Random random, int batch, int seq) {
        long[] ids = new long[batch * seq];
        long[] mask = new long[batch * seq];
        long[] types = new long[batch * seq];
        for (int b = 0; b < batch; b++) {
            int real = 1 + random.nextInt(seq);
            for (int s = 0; s < seq; s++) {
                ids[b * seq + s] = random.nextInt(100);
                mask[b * seq + s] = s < real ? 1 : 0;
                types[b * seq + s] = random.nextInt(2);
            }
        }
        return new Request(List.of(tensor("input_ids", batch, seq, ids), tensor("attention_mask", batch, seq, mask),
                tensor("token_type_ids", batch, seq, types)), Set.of());
    }

    private static HostTensor tensor(String name, int batch, int seq, long[] values) {
        return new HostTensor(name, DataType.INT64, new long[] {batch, seq}, MemorySegment.ofArray(values));
    }
}
