package io.gpupool.serving.fake;

import io.gpupool.memory.DeviceBlock;
import io.gpupool.model.DataType;
import io.gpupool.model.ExecutionContext;
import io.gpupool.model.HostTensor;
import io.gpupool.model.InferenceModel;
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
 * all at once while {@code gate} runs (given the request's rows). Input {@code x} FP32 [-1, 4], output {@code y} = x.
 */
public final class PlannedTestModel implements InferenceModel, PlannedMemory {

    private final ModelSignature signature;
    private final long blockBytes;
    /** Runs with the request's rows while its memory is held. */
    public volatile IntConsumer gate = rows -> { };
    public final AtomicInteger invocations = new AtomicInteger();
    /** Requests computing now, and the most at once. */
    public final AtomicInteger running = new AtomicInteger();
    public final AtomicInteger mostRunning = new AtomicInteger();

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
        invocations.incrementAndGet();
        HostTensor x = given.getFirst();
        List<DeviceBlock> blocks = new ArrayList<>();
        try {
            for (long row = 0; row < x.shape()[0]; row++) {
                blocks.add(context.allocator().allocate(blockBytes, context.stream()));
            }
            mostRunning.accumulateAndGet(running.incrementAndGet(), Math::max);
            try {
                gate.accept((int) x.shape()[0]);
            } finally {
                running.decrementAndGet();
            }
            return List.of(new HostTensor("y", DataType.FP32, x.shape(), x.data()));
        } finally {
            blocks.forEach(DeviceBlock::release);
        }
    }

    @Override
    public void close() {
    }
}
