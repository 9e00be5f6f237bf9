package io.gpupool.model.bert;

import io.gpupool.backend.host.HostBackend;
import io.gpupool.kernels.TensorOps;
import io.gpupool.kernels.host.HostTensorOps;
import io.gpupool.memory.PoolConfig;
import io.gpupool.memory.pool.DevicePool;
import io.gpupool.model.BatchableModel;
import io.gpupool.model.ExecutionContext;
import io.gpupool.model.HostTensor;
import io.gpupool.model.LoadTarget;
import io.gpupool.model.PlannedMemory;
import io.gpupool.model.repository.ModelRepository;
import io.gpupool.model.testing.TestStream;
import io.gpupool.model.testing.TrackingAllocator;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;

import static io.gpupool.model.bert.BertBatchingTest.bert;
import static io.gpupool.model.bert.BertBatchingTest.mixedBertRequests;
import static io.gpupool.model.bert.BertBatchingTest.mlp;
import static io.gpupool.model.bert.BertBatchingTest.withoutPackedOps;
import static io.gpupool.model.testing.Fixtures.fixture;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * The shipped models with {@code gpupool.serving.request-arena} on (LoadTarget#requestArena): the same outputs as
 * with a block per tensor, bit for bit on the host kernels, alone and batched (packed and padded); one allocation
 * per forward, of exactly the bytes the memory admission charges for it; nothing left in the pool after a failure.
 */
class RequestArenaModelsTest {

    final TestStream stream = new TestStream(0);
    final TrackingAllocator weights = new TrackingAllocator();
    final TrackingAllocator requests = new TrackingAllocator();
    final List<AutoCloseable> loaded = new ArrayList<>();

    @AfterEach
    void close() throws Exception {
        for (AutoCloseable model : loaded) {
            model.close();
        }
        assertThat(requests.outstandingBlocks()).as("activations released").isZero();
        stream.close();
        weights.close();
        requests.close();
    }

    BatchableModel load(String name, TensorOps ops, boolean arena) {
        BatchableModel model = (BatchableModel) ModelRepository.loadModel(name, fixture(name),
                new LoadTarget(stream, weights, ops, arena));
        loaded.add(model);
        return model;
    }

    ExecutionContext context(TensorOps ops) {
        return new ExecutionContext(stream, requests, ops);
    }

    /** Every output of every request, as raw bytes, alone and then as one batch. */
    private List<byte[]> outputs(BatchableModel model, TensorOps ops, List<BertBatchingTest.Request> batch) {
        List<byte[]> all = new ArrayList<>();
        List<BatchableModel.Member> members = new ArrayList<>();
        for (BertBatchingTest.Request r : batch) {
            for (HostTensor out : model.infer(r.inputs(), r.outputs(), context(ops))) {
                all.add(out.data().toArray(ValueLayout.JAVA_BYTE));
            }
            members.add(model.prepare(r.inputs(), r.outputs()));
        }
        for (List<HostTensor> member : model.inferBatch(members, context(ops))) {
            for (HostTensor out : member) {
                all.add(out.data().toArray(ValueLayout.JAVA_BYTE));
            }
        }
        return all;
    }

    private void assertSameOutputs(String name, TensorOps ops, List<BertBatchingTest.Request> batch) {
        List<byte[]> perTensor = outputs(load(name, ops, false), ops, batch);
        List<byte[]> inArena = outputs(load(name, ops, true), ops, batch);
        assertThat(inArena).hasSameSizeAs(perTensor);
        for (int i = 0; i < perTensor.size(); i++) {
            assertThat(inArena.get(i)).as("output %d", i).isEqualTo(perTensor.get(i));
        }
    }

    @Test
    void bertGivesTheSameOutputsAloneAndPackedInBatches() {
        HostTensorOps ops = new HostTensorOps();
        assertThat(load("tiny-bert", ops, true).batchLayout()).isEqualTo("packed");
        assertSameOutputs("tiny-bert", ops, mixedBertRequests());
        assertSameOutputs("tiny-bert-cls", ops, List.of(bert(6, 2, 9, 2, true, true, java.util.Set.of()),
                bert(7, 1, 16, 0, false, false, java.util.Set.of())));
    }

    @Test
    void bertGivesTheSameOutputsInPaddedBatches() {
        TensorOps ops = withoutPackedOps(new HostTensorOps());
        assertThat(load("tiny-bert", ops, true).batchLayout()).isEqualTo("padded");
        assertSameOutputs("tiny-bert", ops, mixedBertRequests().subList(0, 3));
    }

    @Test
    void mlpGivesTheSameOutputs() {
        assertSameOutputs("iris-mlp", new HostTensorOps(), List.of(
                mlp(new float[]{5.1f, 3.5f, 1.4f, 0.2f, 6.7f, 3.0f, 5.2f, 2.3f}, java.util.Set.of()),
                mlp(new float[]{5.9f, 3.0f, 4.2f, 1.5f}, java.util.Set.of("label"))));
    }

    @Test
    void eachForwardTakesOneBlockOfExactlyWhatTheAdmissionCharges() {
        HostTensorOps ops = new HostTensorOps();
        BatchableModel perTensor = load("tiny-bert", ops, false);
        BatchableModel inArena = load("tiny-bert", ops, true);
        PlannedMemory planned = (PlannedMemory) inArena;
        BertBatchingTest.Request request = mixedBertRequests().getFirst();   // 3 x 10
        long charge = planned.peakActivationBytes(3, 10);

        long before = requests.metrics().counters().allocations();
        requests.resetPeak();
        inArena.infer(request.inputs(), request.outputs(), context(ops));
        assertThat(requests.metrics().counters().allocations() - before).isEqualTo(1);
        assertThat(requests.peakBytes()).isEqualTo(charge);
        assertThat(planned.largestActivationBytes(3, 10)).as("the arena is the largest allocation").isEqualTo(charge);
        long liveness = ((PlannedMemory) perTensor).peakActivationBytes(3, 10);
        assertThat(charge).as("at least the liveness peak, and close to it").isBetween(liveness, liveness * 5 / 4);

        // The pool's own rounding applies to the one block, as the admission charges it.
        try (HostBackend host = new HostBackend();
             DevicePool pool = new DevicePool(host.devices().getFirst().chunkSource(), PoolConfig.defaults())) {
            assertThat(planned.peakActivationBytes(3, 10, pool::blockBytes)).isEqualTo(pool.blockBytes(charge));

            List<BatchableModel.Member> members = new ArrayList<>();
            for (BertBatchingTest.Request r : mixedBertRequests()) {
                members.add(inArena.prepare(r.inputs(), r.outputs()));
            }
            long batchCharge = inArena.batchPeakBytes(members);
            before = requests.metrics().counters().allocations();
            requests.resetPeak();
            inArena.inferBatch(members, context(ops));
            assertThat(requests.metrics().counters().allocations() - before).isEqualTo(1);
            assertThat(requests.peakBytes()).isEqualTo(batchCharge);
            assertThat(inArena.batchPeakBytes(members, pool::blockBytes)).isEqualTo(pool.blockBytes(batchCharge));
            assertThat(inArena.batchPeakBytes(members)).as("more members plan more")
                    .isGreaterThan(inArena.batchPeakBytes(members.subList(0, 1)));
        }
    }

    /** One batch: a single allocation of exactly its planned bytes, released when the batch returns. */
    private void assertOneBlock(BatchableModel model, TensorOps ops, List<BertBatchingTest.Request> batch) {
        List<BatchableModel.Member> members = new ArrayList<>();
        for (BertBatchingTest.Request r : batch) {
            members.add(model.prepare(r.inputs(), r.outputs()));
        }
        long before = requests.metrics().counters().allocations();
        requests.resetPeak();
        model.inferBatch(members, context(ops));
        assertThat(requests.metrics().counters().allocations() - before).as("%s batch", model.batchLayout())
                .isEqualTo(1);
        assertThat(requests.peakBytes()).isEqualTo(model.batchPeakBytes(members));
        assertThat(requests.currentBytes()).isZero();
    }

    @Test
    void packedPaddedAndMlpBatchesEachRunInOneBlock() {
        HostTensorOps ops = new HostTensorOps();
        assertOneBlock(load("tiny-bert", ops, true), ops, mixedBertRequests());
        TensorOps padding = withoutPackedOps(new HostTensorOps());
        BatchableModel padded = load("tiny-bert", padding, true);
        assertThat(padded.batchLayout()).isEqualTo("padded");
        assertOneBlock(padded, padding, mixedBertRequests().subList(0, 3));
        assertOneBlock(load("iris-mlp", ops, true), ops, List.of(
                mlp(new float[]{5.1f, 3.5f, 1.4f, 0.2f, 6.7f, 3.0f, 5.2f, 2.3f}, java.util.Set.of()),
                mlp(new float[]{5.9f, 3.0f, 4.2f, 1.5f}, java.util.Set.of("label"))));
    }

    @Test
    void aFailureMidForwardLeavesThePoolAtZeroAllocated() {
        HostTensorOps ops = new HostTensorOps();
        BatchableModel model = load("tiny-bert", ops, true);
        BertBatchingTest.Request request = mixedBertRequests().getFirst();
        try (HostBackend host = new HostBackend();
             DevicePool pool = new DevicePool(host.devices().getFirst().chunkSource(), PoolConfig.defaults())) {
            ExecutionContext context = new ExecutionContext(stream, pool, ops);
            stream.failAtTask(4);
            assertThatThrownBy(() -> model.infer(request.inputs(), request.outputs(), context))
                    .hasMessageContaining("injected failure");
            pool.trim();
            assertThat(pool.metrics().allocatedBytes()).isZero();

            stream.failAtTask(0);
            List<HostTensor> again = model.infer(request.inputs(), request.outputs(), context);
            assertThat(again).isNotEmpty();
            pool.trim();
            assertThat(pool.metrics().allocatedBytes()).isZero();
            assertThat(pool.metrics().counters().allocations()).as("one block per forward").isEqualTo(2);
        }
    }
}
