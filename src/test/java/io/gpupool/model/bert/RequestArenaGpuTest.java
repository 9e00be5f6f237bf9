package io.gpupool.model.bert;

import io.gpupool.backend.ComputeDevice;
import io.gpupool.backend.DeviceStream;
import io.gpupool.kernels.cuda.CudaTensorOps;
import io.gpupool.kernels.cuda.Precision;
import io.gpupool.memory.PoolConfig;
import io.gpupool.memory.pool.DevicePool;
import io.gpupool.model.BatchableModel;
import io.gpupool.model.ExecutionContext;
import io.gpupool.model.HostTensor;
import io.gpupool.model.InferenceModel;
import io.gpupool.model.bert.BertRequests.Request;
import io.gpupool.model.graph.DeviceGraphs;
import io.gpupool.model.graph.GraphLimits;
import io.gpupool.model.graph.ShapeBuckets;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;
import java.util.Set;

import static io.gpupool.model.bert.BertRequests.assertBatchEqualsAlone;
import static io.gpupool.model.bert.BertRequests.bert;
import static io.gpupool.model.bert.BertRequests.mixedBertRequests;
import static io.gpupool.model.bert.BertRequests.shortBertRequests;
import static io.gpupool.model.testing.Fixtures.floats;
import static io.gpupool.model.testing.Fixtures.maxAbsDiff;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * Request arenas on the CUDA kernels ({@code gpupool.serving.request-arena}): tiny BERT alone and batched, FP32
 * (packed) and BF16 (padded), gives what it gives with a block per tensor; batches in arenas (FP32 packed, BF16
 * padded, BF16 packed on cuBLASLt) give each request what it gets alone; on the two-level pool each forward takes
 * one block and the pool is empty afterwards; a graph captured from an arena forward replays the eager outputs.
 * Skipped, not failed, where no driver or device is present.
 */
@Tag("gpu")
class RequestArenaGpuTest {

    CudaModels gpu;
    ComputeDevice device;
    DeviceStream stream;
    DevicePool pool;
    final List<AutoCloseable> loaded = new ArrayList<>();

    @BeforeEach
    void open() {
        gpu = CudaModels.openOrSkip();
        device = gpu.device;
        stream = gpu.stream;
        pool = new DevicePool(device.chunkSource(), PoolConfig.defaults());
    }

    @AfterEach
    void close() throws Exception {
        if (gpu == null) {
            return;
        }
        for (AutoCloseable model : loaded) {
            model.close();
        }
        gpu.close(() -> {
            try {
                pool.trim();
                assertThat(pool.metrics().allocatedBytes()).as("pool bytes after the test").isZero();
            } finally {
                pool.close();
            }
        });
    }

    BatchableModel load(CudaTensorOps ops, boolean arena) {
        BatchableModel model = gpu.load("tiny-bert", ops, arena);
        loaded.add(model);
        return model;
    }

    /** Each request alone, then all of them as one batch: every output, in order. */
    private List<HostTensor> outputs(BatchableModel model, CudaTensorOps ops, List<Request> batch) {
        ExecutionContext context = new ExecutionContext(stream, pool, ops);
        List<HostTensor> all = new ArrayList<>();
        List<BatchableModel.Member> members = new ArrayList<>();
        for (Request r : batch) {
            all.addAll(model.infer(r.inputs(), r.outputs(), context));
            members.add(model.prepare(r.inputs(), r.outputs()));
        }
        model.inferBatch(members, context).forEach(all::addAll);
        return all;
    }

    private void assertSameOutputs(CudaTensorOps ops, String layout, List<Request> batch,
                                   double tolerance) {
        BatchableModel perTensor = load(ops, false);
        BatchableModel inArena = load(ops, true);
        assertThat(inArena.batchLayout()).isEqualTo(layout);
        List<HostTensor> expected = outputs(perTensor, ops, batch);
        long before = pool.metrics().counters().allocations();
        List<HostTensor> actual = outputs(inArena, ops, batch);
        assertThat(pool.metrics().counters().allocations() - before).as("one block per forward")
                .isEqualTo(batch.size() + 1);
        assertThat(actual).hasSameSizeAs(expected);
        for (int i = 0; i < expected.size(); i++) {
            assertThat(actual.get(i).shape()).containsExactly(expected.get(i).shape());
            assertThat(maxAbsDiff(floats(expected.get(i)), floats(actual.get(i))))
                    .as("output %d (%s)", i, expected.get(i).name()).isLessThanOrEqualTo(tolerance);
        }
    }

    @Test
    void fp32PackedBatchesAndRequestsAloneGiveTheSameOutputsInArenas() {
        CudaTensorOps ops = new CudaTensorOps(device, Precision.FP32);
        assertSameOutputs(ops, "packed", mixedBertRequests(), 1e-5);
    }

    @Test
    void bf16PaddedBatchesAndRequestsAloneGiveTheSameOutputsInArenas() {
        CudaTensorOps ops = new CudaTensorOps(device, Precision.BF16);
        assertSameOutputs(ops, "padded", shortBertRequests(), 1e-3);
    }

    @Test
    void batchesInArenasEqualEachRequestAloneFp32PackedAndBf16Padded() {
        CudaTensorOps fp32 = new CudaTensorOps(device, Precision.FP32);
        BatchableModel packed = load(fp32, true);
        assertThat(packed.batchLayout()).isEqualTo("packed");
        assertBatchEqualsAlone(packed, () -> new ExecutionContext(stream, pool, fp32), mixedBertRequests(), 1e-5);
        CudaTensorOps bf16 = new CudaTensorOps(device, Precision.BF16);
        BatchableModel padded = load(bf16, true);
        assertThat(padded.batchLayout()).isEqualTo("padded");
        assertBatchEqualsAlone(padded, () -> new ExecutionContext(stream, pool, bf16), shortBertRequests(), 1e-3);
    }

    @Test
    void bf16PackedBatchesInArenasStayCloseToEachRequestAlone() {
        CudaTensorOps ops = gpu.packedBf16Ops(gpu.libraryOrSkip(), pool);
        try {
            BatchableModel model = load(ops, true);
            assertThat(model.batchLayout()).isEqualTo("packed");
            assertBatchEqualsAlone(model, () -> new ExecutionContext(stream, pool, ops), mixedBertRequests(),
                    BertBatchingGpuTest.BF16_TOLERANCE);
        } finally {
            stream.synchronize();
            ops.close();
        }
    }

    @Test
    void aGraphCapturedFromAnArenaForwardReplaysTheEagerOutputs() throws Exception {
        CudaTensorOps ops = new CudaTensorOps(device, Precision.FP32);
        InferenceModel bertInArena = load(ops, true);
        ShapeBuckets buckets = new ShapeBuckets(List.of(1, 2, 4, 8), List.of(8, 16, 32, 64));
        try (DeviceGraphs graphs = DeviceGraphs.open(device, pool, new GraphLimits(true, 16, 1L << 30), buckets, 1)
                .orElseThrow()) {
            InferenceModel graphed = graphs.wrap(bertInArena);
            ExecutionContext context = new ExecutionContext(stream, pool, ops);
            Request request = bert(9, 2, 16, 3, true, true, Set.of());
            List<HostTensor> eager = bertInArena.infer(request.inputs(), request.outputs(), context);
            long deadline = System.nanoTime() + 20_000_000_000L;
            graphed.infer(request.inputs(), request.outputs(), context);   // a miss: eager, and a capture starts
            while (graphs.metrics().captures() + graphs.metrics().failures() < 1 && System.nanoTime() < deadline) {
                Thread.sleep(5);
            }
            assertThat(graphs.metrics().failures()).isZero();
            assertThat(graphs.metrics().captures()).isEqualTo(1);
            List<HostTensor> replayed = graphed.infer(request.inputs(), request.outputs(), context);
            assertThat(graphs.metrics().hits()).isEqualTo(1);
            for (int i = 0; i < eager.size(); i++) {
                assertThat(maxAbsDiff(floats(eager.get(i)), floats(replayed.get(i)))).as(eager.get(i).name())
                        .isLessThanOrEqualTo(1e-5);
            }
            graphed.close();
            loaded.remove(bertInArena);
        }
    }
}
