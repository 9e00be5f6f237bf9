package io.gpupool.model.bert;

import io.gpupool.backend.host.HostBackend;
import io.gpupool.kernels.TensorOps;
import io.gpupool.kernels.host.HostTensorOps;
import io.gpupool.config.GpuPoolConfiguration;
import io.gpupool.memory.MemoryAdmission;
import io.gpupool.memory.PoolConfig;
import io.gpupool.memory.trace.TracingAllocator;
import io.gpupool.memory.pool.DevicePool;
import io.gpupool.model.BatchableModel;
import io.gpupool.model.ExecutionContext;
import io.gpupool.model.HostTensor;
import io.gpupool.model.PlannedMemory;
import io.gpupool.model.bert.BertRequests.Request;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;

import static io.gpupool.model.bert.BertRequests.clsBertRequests;
import static io.gpupool.model.bert.BertRequests.irisRequests;
import static io.gpupool.model.bert.BertRequests.members;
import static io.gpupool.model.bert.BertRequests.mixedBertRequests;
import static io.gpupool.model.bert.BertRequests.shortBertRequests;
import static io.gpupool.model.bert.HostModels.withoutPackedOps;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * The shipped models with {@code gpupool.serving.request-arena} on (LoadTarget#requestArena): the same outputs as
 * with a block per tensor, bit for bit on the host kernels, alone and batched (packed and padded); one allocation
 * per forward, of exactly the bytes the memory admission charges for it; nothing left in the pool after a failure.
 */
class RequestArenaModelsTest {

    private final HostModels models = new HostModels();

    @AfterEach
    void close() throws Exception {
        models.close();
    }

    /** Every output of every request, as raw bytes, alone and then as one batch. */
    private List<byte[]> outputs(BatchableModel model, TensorOps ops, List<Request> batch) {
        List<byte[]> all = new ArrayList<>();
        List<BatchableModel.Member> members = new ArrayList<>();
        for (Request r : batch) {
            for (HostTensor out : model.infer(r.inputs(), r.outputs(), models.context(ops))) {
                all.add(out.data().toArray(ValueLayout.JAVA_BYTE));
            }
            members.add(model.prepare(r.inputs(), r.outputs()));
        }
        for (List<HostTensor> member : model.inferBatch(members, models.context(ops))) {
            for (HostTensor out : member) {
                all.add(out.data().toArray(ValueLayout.JAVA_BYTE));
            }
        }
        return all;
    }

    private void assertSameOutputs(String name, TensorOps ops, List<Request> batch) {
        List<byte[]> perTensor = outputs(models.load(name, ops, false), ops, batch);
        List<byte[]> inArena = outputs(models.load(name, ops, true), ops, batch);
        assertThat(inArena).hasSameSizeAs(perTensor);
        for (int i = 0; i < perTensor.size(); i++) {
            assertThat(inArena.get(i)).as("output %d", i).isEqualTo(perTensor.get(i));
        }
    }

    @Test
    void bertGivesTheSameOutputsAloneAndPackedInBatches() {
        HostTensorOps ops = new HostTensorOps();
        assertThat(models.load("tiny-bert", ops, true).batchLayout()).isEqualTo("packed");
        assertSameOutputs("tiny-bert", ops, mixedBertRequests());
        assertSameOutputs("tiny-bert-cls", ops, clsBertRequests().subList(0, 2));
    }

    @Test
    void bertGivesTheSameOutputsInPaddedBatches() {
        TensorOps ops = withoutPackedOps(new HostTensorOps());
        assertThat(models.load("tiny-bert", ops, true).batchLayout()).isEqualTo("padded");
        assertSameOutputs("tiny-bert", ops, shortBertRequests());
    }

    @Test
    void mlpGivesTheSameOutputs() {
        assertSameOutputs("iris-mlp", new HostTensorOps(), irisRequests().subList(0, 2));
    }

    @Test
    void eachForwardTakesOneBlockOfExactlyWhatTheAdmissionCharges() {
        HostTensorOps ops = new HostTensorOps();
        BatchableModel perTensor = models.load("tiny-bert", ops, false);
        BatchableModel inArena = models.load("tiny-bert", ops, true);
        PlannedMemory planned = (PlannedMemory) inArena;
        Request request = mixedBertRequests().getFirst();   // 3 x 10
        long charge = planned.peakActivationBytes(3, 10);

        long before = models.requests.metrics().counters().allocations();
        models.requests.resetPeak();
        inArena.infer(request.inputs(), request.outputs(), models.context(ops));
        assertThat(models.requests.metrics().counters().allocations() - before).isEqualTo(1);
        assertThat(models.requests.peakBytes()).isEqualTo(charge);
        assertThat(planned.largestActivationBytes(3, 10)).as("the arena is the largest allocation").isEqualTo(charge);
        long liveness = ((PlannedMemory) perTensor).peakActivationBytes(3, 10);
        assertThat(charge).as("at least the liveness peak, and close to it").isBetween(liveness, liveness * 5 / 4);

        // The pool's own rounding of an arena applies to the one block, as the admission charges it.
        try (HostBackend host = new HostBackend();
             DevicePool pool = new DevicePool(host.devices().getFirst().chunkSource(), PoolConfig.defaults())) {
            assertThat(planned.peakActivationBytes(3, 10, pool::arenaBlockBytes)).isEqualTo(pool.arenaBlockBytes(charge));

            List<BatchableModel.Member> members = members(inArena, mixedBertRequests());
            long batchCharge = inArena.batchPeakBytes(members);
            before = models.requests.metrics().counters().allocations();
            models.requests.resetPeak();
            inArena.inferBatch(members, models.context(ops));
            assertThat(models.requests.metrics().counters().allocations() - before).isEqualTo(1);
            assertThat(models.requests.peakBytes()).isEqualTo(batchCharge);
            assertThat(inArena.batchPeakBytes(members, pool::arenaBlockBytes)).isEqualTo(pool.arenaBlockBytes(batchCharge));
            assertThat(inArena.batchPeakBytes(members)).as("more members plan more")
                    .isGreaterThan(inArena.batchPeakBytes(members.subList(0, 1)));
        }
    }

    /**
     * As the server wires it (GpuPoolConfiguration): activations from a pool behind the tracing decorator, the
     * admission rounding arenas. tiny-bert's arena is a few KiB; it takes, and is charged, one whole pool block,
     * which its stream's cache then keeps for the next request.
     */
    @Test
    void inTheServersWiringASmallArenaIsOneWholePoolBlockAndIsChargedSo() {
        HostTensorOps ops = new HostTensorOps();
        BatchableModel inArena = models.load("tiny-bert", ops, true);
        PlannedMemory planned = (PlannedMemory) inArena;
        Request request = mixedBertRequests().getFirst();   // 3 x 10
        try (HostBackend host = new HostBackend();
             DevicePool pool = new DevicePool(host.devices().getFirst().chunkSource(), PoolConfig.defaults());
             TracingAllocator activations = new TracingAllocator(pool, 64)) {
            activations.startRecording();
            MemoryAdmission admission = GpuPoolConfiguration.admission("host", 1L << 30, activations, true, () -> 0, true);
            long charge = planned.peakActivationBytes(3, 10, admission::blockBytes);
            assertThat(planned.peakActivationBytes(3, 10)).as("the plan's own arena").isLessThan(PoolConfig.MIB);

            inArena.infer(request.inputs(), request.outputs(), new ExecutionContext(models.stream, activations, ops));
            assertThat(activations.drain().size()).as("the arena's allocate and free, traced").isEqualTo(2);
            assertThat(pool.metrics().counters().allocations()).isEqualTo(1);
            assertThat(charge).as("charged: one minimum block").isEqualTo(pool.config().minBlockBytes());
            assertThat(pool.metrics().cachedBytes()).as("taken and kept by the stream: the same block")
                    .isEqualTo(charge);
        }
    }

    /** One batch: a single allocation of exactly its planned bytes, released when the batch returns. */
    private void assertOneBlock(BatchableModel model, TensorOps ops, List<Request> batch) {
        List<BatchableModel.Member> members = members(model, batch);
        long before = models.requests.metrics().counters().allocations();
        models.requests.resetPeak();
        model.inferBatch(members, models.context(ops));
        assertThat(models.requests.metrics().counters().allocations() - before).as("%s batch", model.batchLayout())
                .isEqualTo(1);
        assertThat(models.requests.peakBytes()).isEqualTo(model.batchPeakBytes(members));
        assertThat(models.requests.currentBytes()).isZero();
    }

    @Test
    void packedPaddedAndMlpBatchesEachRunInOneBlock() {
        HostTensorOps ops = new HostTensorOps();
        assertOneBlock(models.load("tiny-bert", ops, true), ops, mixedBertRequests());
        TensorOps padding = withoutPackedOps(new HostTensorOps());
        BatchableModel padded = models.load("tiny-bert", padding, true);
        assertThat(padded.batchLayout()).isEqualTo("padded");
        assertOneBlock(padded, padding, shortBertRequests());
        assertOneBlock(models.load("iris-mlp", ops, true), ops, irisRequests().subList(0, 2));
    }

    @Test
    void aFailureMidForwardLeavesThePoolAtZeroAllocated() {
        HostTensorOps ops = new HostTensorOps();
        BatchableModel model = models.load("tiny-bert", ops, true);
        Request request = mixedBertRequests().getFirst();
        try (HostBackend host = new HostBackend();
             DevicePool pool = new DevicePool(host.devices().getFirst().chunkSource(), PoolConfig.defaults())) {
            ExecutionContext context = new ExecutionContext(models.stream, pool, ops);
            models.stream.failAtTask(4);
            assertThatThrownBy(() -> model.infer(request.inputs(), request.outputs(), context))
                    .hasMessageContaining("injected failure");
            pool.trim();
            assertThat(pool.metrics().allocatedBytes()).isZero();

            models.stream.failAtTask(0);
            List<HostTensor> again = model.infer(request.inputs(), request.outputs(), context);
            assertThat(again).isNotEmpty();
            pool.trim();
            assertThat(pool.metrics().allocatedBytes()).isZero();
            assertThat(pool.metrics().counters().allocations()).as("one block per forward").isEqualTo(2);
        }
    }
}
