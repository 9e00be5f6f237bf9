package io.gpupool.serving.fake;

import io.gpupool.memory.DeviceBlock;
import io.gpupool.model.BatchableModel;
import io.gpupool.model.ModelConfig;
import io.gpupool.model.DataType;
import io.gpupool.model.ExecutionContext;
import io.gpupool.model.HostTensor;
import io.gpupool.model.ModelSignature;
import io.gpupool.model.PlannedMemory;
import io.gpupool.model.TensorSpec;

import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.IntConsumer;
import java.util.function.LongUnaryOperator;

/**
 * A model whose plan says exactly what it takes: {@code blockBytes} of device memory per batch row, held
 * all at once while {@code gate} runs (given the forward's rows). Input {@code x} FP32 [-1, 4], output
 * {@code y} = x. It batches (rows concatenated) when {@link #batching} turns batching on.
 */
public final class PlannedTestModel implements BatchableModel, PlannedMemory {

    private final ModelSignature signature;
    private final long blockBytes;
    /** Runs with the request's rows while its memory is held. */
    public volatile IntConsumer gate = rows -> { };
    public final AtomicInteger invocations = new AtomicInteger();
    /** Requests computing now, and the most at once. */
    public final AtomicInteger running = new AtomicInteger();
    public final AtomicInteger mostRunning = new AtomicInteger();
    /** Rows held by the forwards computing now, and the most at once. */
    public final AtomicInteger rowsRunning = new AtomicInteger();
    public final AtomicInteger mostRowsRunning = new AtomicInteger();
    /** Requests per forward, in the order the forwards started. */
    public final List<Integer> forwards = new java.util.concurrent.CopyOnWriteArrayList<>();
    public volatile ModelConfig.Batching batching = ModelConfig.Batching.UNSET;
    /** Bytes each forward takes beyond its plan, in one block (a plan that underestimates). */
    public volatile long unplannedBytes;

    private record Rows(HostTensor x) implements Member {
        @Override public int rows() { return (int) x.shape()[0]; }
        @Override public int tokens() { return rows(); }
        @Override public int sequenceLength() { return 0; }
    }

    public PlannedTestModel(String name, int maxBatch, long blockBytes) {
        this.signature = new ModelSignature(name, "1", "test",
                List.of(new TensorSpec("x", DataType.FP32, new long[]{-1, 4})),
                List.of(new TensorSpec("y", DataType.FP32, new long[]{-1, 4})), maxBatch, 0);
        this.blockBytes = blockBytes;
    }

    @Override
    public ModelSignature signature() {
        return signature;
    }

    @Override
    public long peakActivationBytes(int batch, int seq) {
        return batch * blockBytes;
    }

    @Override
    public long peakActivationBytes(int batch, int seq, LongUnaryOperator rounding) {
        return batch * rounding.applyAsLong(blockBytes);
    }

    @Override
    public long largestActivationBytes(int batch, int seq) {
        return blockBytes;
    }

    @Override
    public List<HostTensor> infer(List<HostTensor> given, Set<String> requestedOutputs, ExecutionContext context) {
        HostTensor x = given.getFirst();
        forward(1, (int) x.shape()[0], context);
        return List.of(new HostTensor("y", DataType.FP32, x.shape(), x.data()));
    }

    /** Holds {@code rows} blocks while the gate runs, as a forward over that many rows would. */
    private void forward(int requests, int rows, ExecutionContext context) {
        invocations.incrementAndGet();
        forwards.add(requests);
        List<DeviceBlock> blocks = new ArrayList<>();
        try {
            for (int row = 0; row < rows; row++) {
                blocks.add(context.allocator().allocate(blockBytes, context.stream()));
            }
            if (unplannedBytes > 0) {
                blocks.add(context.allocator().allocate(unplannedBytes, context.stream()));
            }
            mostRunning.accumulateAndGet(running.incrementAndGet(), Math::max);
            mostRowsRunning.accumulateAndGet(rowsRunning.addAndGet(rows), Math::max);
            try {
                gate.accept(rows);
            } finally {
                running.decrementAndGet();
                rowsRunning.addAndGet(-rows);
            }
        } finally {
            blocks.forEach(DeviceBlock::release);
        }
    }

    @Override
    public Member prepare(List<HostTensor> inputs, Set<String> requestedOutputs) {
        HostTensor x = inputs.getFirst();
        return new Rows(new HostTensor(x.name(), x.dataType(), x.shape(),
                java.lang.foreign.MemorySegment.ofArray(x.data().toArray(java.lang.foreign.ValueLayout.JAVA_BYTE))));
    }

    @Override
    public long batchPeakBytes(List<? extends Member> members) {
        return members.stream().mapToLong(Member::rows).sum() * blockBytes;
    }

    @Override
    public long batchPeakBytes(List<? extends Member> members, LongUnaryOperator rounding) {
        return members.stream().mapToLong(Member::rows).sum() * rounding.applyAsLong(blockBytes);
    }

    @Override
    public List<List<HostTensor>> inferBatch(List<? extends Member> members, ExecutionContext context) {
        forward(members.size(), members.stream().mapToInt(Member::rows).sum(), context);
        List<List<HostTensor>> outputs = new ArrayList<>();
        for (Member member : members) {
            HostTensor x = ((Rows) member).x();
            outputs.add(List.of(new HostTensor("y", DataType.FP32, x.shape(), x.data())));
        }
        return outputs;
    }

    @Override
    public String batchLayout() {
        return "packed";
    }

    @Override
    public ModelConfig.Batching batching() {
        return batching;
    }

    @Override
    public void close() {
    }
}
