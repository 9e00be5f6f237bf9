package io.gpupool.serving.fake;

import io.gpupool.memory.DeviceBlock;
import io.gpupool.model.ExecutionContext;
import io.gpupool.model.HostTensor;
import io.gpupool.model.InferenceModel;
import io.gpupool.model.ModelSignature;
import io.gpupool.model.TensorSpec;

import java.util.List;
import java.util.Set;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Function;

/**
 * A model for serving tests: computes on the host with {@code compute}, but first takes device
 * memory for its inputs from the context's allocator on the leased stream (and gives it back), so
 * that tests see allocation, out-of-memory and leaks as the real models cause them. {@code gate}
 * runs before computing and lets a test hold a request on its stream.
 */
public final class TestModel implements InferenceModel {

    private final ModelSignature signature;
    private final Function<List<HostTensor>, List<HostTensor>> compute;
    public volatile Runnable gate = () -> { };
    /** Device bytes taken on top of the inputs' size, to drive the allocator into out-of-memory. */
    public volatile long extraBytes;
    public final AtomicInteger invocations = new AtomicInteger();
    public final AtomicInteger devicesUsed = new AtomicInteger(-1);
    public volatile boolean closed;

    public TestModel(String name, int maxBatch, int maxSequence, List<TensorSpec> inputs, List<TensorSpec> outputs,
                     Function<List<HostTensor>, List<HostTensor>> compute) {
        this.signature = new ModelSignature(name, "1", "test", inputs, outputs, maxBatch, maxSequence);
        this.compute = compute;
    }

    @Override
    public ModelSignature signature() {
        return signature;
    }

    @Override
    public List<HostTensor> infer(List<HostTensor> given, Set<String> requestedOutputs, ExecutionContext context) {
        invocations.incrementAndGet();
        devicesUsed.set(context.stream().device().index());
        long bytes = 1 + extraBytes;
        for (HostTensor tensor : given) {
            bytes += tensor.data().byteSize();
        }
        DeviceBlock scratch = context.allocator().allocate(bytes, context.stream());
        try {
            gate.run();
            return compute.apply(given).stream()
                    .filter(t -> requestedOutputs.isEmpty() || requestedOutputs.contains(t.name())).toList();
        } finally {
            scratch.release();
        }
    }

    @Override
    public void close() {
        closed = true;
    }
}
