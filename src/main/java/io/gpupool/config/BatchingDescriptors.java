package io.gpupool.config;

import io.gpupool.actuate.GpuPoolEndpoint.BatchingDescriptor;
import io.gpupool.actuate.GpuPoolEndpoint.PhasesDescriptor;
import io.gpupool.actuate.GpuPoolEndpoint.QueueDelayDescriptor;
import io.gpupool.actuate.ManagedBatching;
import io.gpupool.backend.ComputeBackend;
import io.gpupool.model.BatchableModel;
import io.gpupool.serving.BatchPolicy;
import io.gpupool.serving.BatchStatistics;
import io.gpupool.serving.DynamicBatcher;
import io.gpupool.serving.ModelRegistry;
import io.gpupool.serving.ServedModel;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The {@code gpupool} endpoint's batching section, read from the batcher: every served model whose policy batches,
 * whether or not it has had a request yet, with its queues' lengths now and its counters since start.
 */
final class BatchingDescriptors implements ManagedBatching {

    private final ModelRegistry registry;
    private final DynamicBatcher batcher;
    private final ComputeBackend backend;

    BatchingDescriptors(ModelRegistry registry, DynamicBatcher batcher, ComputeBackend backend) {
        this.registry = registry;
        this.batcher = batcher;
        this.backend = backend;
    }

    @Override
    public List<BatchingDescriptor> models() {
        List<BatchingDescriptor> out = new ArrayList<>();
        for (ServedModel model : registry.models()) {
            BatchPolicy policy = batcher.policy(model);
            if (policy != null) {
                out.add(describe(model, policy));
            }
        }
        return out;
    }

    private BatchingDescriptor describe(ServedModel model, BatchPolicy policy) {
        Map<String, Integer> waitingByDevice = new LinkedHashMap<>();
        int waiting = 0;
        for (Map.Entry<Integer, Integer> queue : batcher.waiting(model).entrySet()) {
            waitingByDevice.put(OperationsWiring.selector(backend, queue.getKey()), queue.getValue());
            waiting += queue.getValue();
        }
        String layout = model.replicas().values().stream().findFirst()
                .map(replica -> ((BatchableModel) replica).batchLayout()).orElse("none");
        BatchStatistics.Snapshot s = batcher.statistics().snapshot(model.name());
        BatchStatistics.QueueDelay delay = s.queueDelay();
        return new BatchingDescriptor(model.name(), model.version(), layout, policy.maxQueueDelay().toNanos() / 1_000,
                policy.maxRequests(), policy.maxTokens(), Arrays.stream(policy.preferredBatchSizes()).boxed().toList(),
                waiting, waitingByDevice, s.executions(), s.requests(), s.inferences(), s.tokens(),
                mean(s.requests(), s.executions()), mean(s.inferences(), s.executions()), mean(s.tokens(), s.executions()),
                s.bypassed(), s.splitsForMemory(), s.cancelledWhileWaiting(),
                new QueueDelayDescriptor(delay.count(), delay.meanNanos(), delay.p50Nanos(), delay.p90Nanos(),
                        delay.p99Nanos(), delay.maxNanos()),
                new PhasesDescriptor(s.phases().forwards(), s.phases().meanForwardNanos(), s.phases().answers(),
                        s.phases().meanAnswerWaitNanos(), s.phases().meanEncodeNanos()));
    }

    private static double mean(long total, long executions) {
        return executions == 0 ? 0.0 : (double) total / executions;
    }
}
