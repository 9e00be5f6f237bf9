package io.gpupool.serving.fake;

import io.gpupool.model.BatchableModel;
import io.gpupool.model.ModelSignature;
import io.gpupool.model.ExecutionContext;
import io.gpupool.model.HostTensor;
import io.gpupool.model.ModelConfig;
import io.gpupool.model.TensorSpec;

import java.util.List;
import java.util.Set;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;

/**
 * A real batchable model with test controls around its batched forward: {@link #hold()} makes the next
 * forwards wait until {@link #release()} (so a test can keep a stream busy while requests queue), every
 * forward's member count is recorded, {@link #failure} is thrown by a forward of {@link #failBatchOfSize}
 * members, and {@link #batching} overrides the model's batching settings. Everything else is the wrapped model's.
 */
public final class GatedBatchModel implements BatchableModel {

    private final BatchableModel model;
    private volatile CountDownLatch gate = new CountDownLatch(0);
    /** Forwards that reached the gate. */
    public final AtomicInteger entered = new AtomicInteger();
    /** Members per batched forward, in the order the forwards started. */
    public final List<Integer> batchSizes = new CopyOnWriteArrayList<>();
    /** Thrown, once, by the first forward of {@link #failBatchOfSize} members. */
    public final AtomicReference<RuntimeException> failure = new AtomicReference<>();
    public volatile int failBatchOfSize;
    /** Replaces the wrapped model's dynamic_batching settings when set. */
    public volatile ModelConfig.Batching batching;

    public GatedBatchModel(BatchableModel model) {
        this.model = model;
    }

    public void hold() {
        gate = new CountDownLatch(1);
    }

    public void release() {
        gate.countDown();
    }

    @Override
    public List<List<HostTensor>> inferBatch(List<? extends Member> members, ExecutionContext context) {
        batchSizes.add(members.size());
        entered.incrementAndGet();
        try {
            if (!gate.await(30, TimeUnit.SECONDS)) {
                throw new IllegalStateException("test gate was never released");
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException(e);
        }
        if (members.size() == failBatchOfSize) {
            RuntimeException planted = failure.getAndSet(null);
            if (planted != null) {
                throw planted;
            }
        }
        return model.inferBatch(members, context);
    }

    @Override
    public Member prepare(List<HostTensor> inputs, Set<String> requestedOutputs) {
        return model.prepare(inputs, requestedOutputs);
    }

    @Override
    public long batchPeakBytes(List<? extends Member> members) {
        return model.batchPeakBytes(members);
    }

    @Override
    public boolean fitsOneForward(List<? extends Member> members) {
        return model.fitsOneForward(members);
    }

    @Override
    public String batchLayout() {
        return model.batchLayout();
    }

    @Override
    public ModelConfig.Batching batching() {
        ModelConfig.Batching override = batching;
        return override != null ? override : model.batching();
    }

    @Override
    public List<HostTensor> infer(List<HostTensor> inputs, Set<String> requestedOutputs, ExecutionContext context) {
        return model.infer(inputs, requestedOutputs, context);
    }

    @Override
    public ModelSignature signature() {
        return model.signature();
    }

    @Override
    public void close() {
        model.close();
    }
}
