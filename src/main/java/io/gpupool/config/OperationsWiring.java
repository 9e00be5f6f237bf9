package io.gpupool.config;

import io.gpupool.actuate.AllocatorAdapter;
import io.gpupool.actuate.DevicePoolAdapter;
import io.gpupool.actuate.InferenceMetrics;
import io.gpupool.actuate.InferenceOutcome;
import io.gpupool.actuate.ManagedBatching;
import io.gpupool.actuate.ManagedPool;
import io.gpupool.actuate.ManagedGraphs;
import io.gpupool.actuate.ManagedPools;
import io.gpupool.actuate.ModelFigures;
import io.gpupool.actuate.ModelStatisticsMeterBinder;
import io.gpupool.actuate.ModelsHealthIndicator;
import io.gpupool.actuate.TracingAllocatorControl;
import io.gpupool.backend.ComputeBackend;
import io.gpupool.kernels.TensorOps;
import io.gpupool.memory.DeviceAllocator;
import io.gpupool.memory.pool.DevicePool;
import io.gpupool.memory.bestfit.BestFitAllocator;
import io.gpupool.memory.trace.TracingAllocator;
import io.gpupool.model.graph.GraphCacheControl;
import io.gpupool.serving.DeviceRuntime;
import io.gpupool.serving.DynamicBatcher;
import io.gpupool.serving.InferenceObserver;
import io.gpupool.serving.ModelFailure;
import io.gpupool.serving.ModelRegistry;
import io.gpupool.serving.ModelStatistics;
import io.gpupool.serving.ServedModel;
import io.gpupool.serving.ServingDevices;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.context.annotation.Primary;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Hands what the serving wiring opened to the operations side: each device's pool (for the
 * {@code gpupool} endpoint, the meters and the pool health), the request life cycle (for the
 * inference meters), the batcher's queues and counters (the endpoint's batching section) and the warm-up state
 * (the {@code models} readiness contributor).
 *
 * <p>Device selectors are {@code <backend>:<index>}, e.g. {@code host:0} or {@code cuda:1}.
 */
@Configuration(proxyBeanMethods = false)
public class OperationsWiring {

    /**
     * Every device's activation allocator, whatever the mode: a {@link DevicePool} with all its
     * levels and controls, any other allocator (BEST_FIT, DIRECT, CUDA_ASYNC) as its totals, peaks,
     * counters and latency, so that the memory of every mode can be read and compared.
     */
    @Bean
    @Primary
    ManagedPools servingManagedPools(ServingDevices devices, ComputeBackend backend) {
        List<ManagedPool> pools = new ArrayList<>();
        for (DeviceRuntime device : devices.devices()) {
            String engine = device.ops().gemmEngine();
            String activations = device.ops().activationBytes() == 2 ? "bf16" : "fp32";
            pools.add(ManagedPool.withKernels(managedPool(selector(backend, device.index()), device),
                    () -> new ManagedPool.Kernels(engine, activations, workspaces(device.ops()),
                            gemmChoices(device.ops().gemmChoices())),
                    device.worker()::releaseIdleWorkspaces, device.worker().admission()));
        }
        return ManagedPools.of(pools);
    }

    /** The kernels' stream workspaces now, for the endpoint and the meters. */
    static ManagedPool.Workspaces workspaces(TensorOps ops) {
        return ops.workspaces().map(w -> new ManagedPool.Workspaces(w.heldBytes(), w.capturedBytes(), w.streams(),
                w.bytesPerStream(), w.releases())).orElse(ManagedPool.Workspaces.NONE);
    }

    /** How the kernels' measured product shapes run, for the endpoint (sorted by shape). */
    static List<ManagedPool.GemmChoice> gemmChoices(List<TensorOps.GemmChoice> measured) {
        return measured.stream()
                .map(c -> new ManagedPool.GemmChoice(c.shape(), c.engine(), orNull(c.millis()),
                        orNull(c.heuristicMillis()), c.candidates()))
                .sorted(java.util.Comparator.comparing(ManagedPool.GemmChoice::shape))
                .toList();
    }

    private static Double orNull(double millis) {
        return Double.isNaN(millis) ? null : millis;
    }

    /** Every CUDA device's graph cache, by device selector (none on the host). */
    @Bean
    ManagedGraphs servingManagedGraphs(DeviceGraphSet graphs, ComputeBackend backend) {
        Map<String, GraphCacheControl> byDevice = new LinkedHashMap<>();
        graphs.byDevice().forEach((index, cache) -> byDevice.put(selector(backend, index), cache));
        return new ManagedGraphs(byDevice);
    }

    /** The batching section of the {@code gpupool} endpoint; none without a batcher. */
    @Bean
    ManagedBatching servingManagedBatching(ModelRegistry registry, ObjectProvider<DynamicBatcher> batcher,
                                           ComputeBackend backend) {
        DynamicBatcher batching = batcher.getIfAvailable();
        return batching == null ? ManagedBatching.NONE : new BatchingDescriptors(registry, batching, backend);
    }

    static ManagedPool managedPool(String selector, DeviceRuntime device) {
        DeviceAllocator allocator = device.allocator();
        TracingAllocatorControl trace = allocator.capability(TracingAllocator.class)   // trace recording on the endpoint
                .map(TracingAllocatorControl::new).orElse(null);
        var pool = allocator.capability(DevicePool.class);
        if (pool.isPresent()) {
            return new DevicePoolAdapter(selector, pool.get(), device.device().chunkSource().capacityBytes(), trace);
        }
        // Not device.chunkSource(): on CUDA with expandable segments that would reserve address space
        // for a source these modes never use.
        long capacity = device.device().totalMemory();
        var bestFitAllocator = allocator.capability(BestFitAllocator.class);
        if (bestFitAllocator.isPresent()) {                           // free segments inside its chunks
            BestFitAllocator bestFit = bestFitAllocator.get();
            return new AllocatorAdapter(selector, new AllocatorAdapter.Metrics(bestFit.metrics(),
                    bestFit::freeBytes, bestFit::largestFreeBytes), capacity, trace, bestFit::trim);
        }
        return AllocatorAdapter.of(selector, allocator.metrics(), capacity, trace);
    }

    @Bean
    InferenceObserver inferenceObserver(InferenceMetrics metrics, ServingDevices devices, ComputeBackend backend) {
        String[] names = new String[devices.devices().stream().mapToInt(DeviceRuntime::index).max().orElse(0) + 1];
        for (DeviceRuntime device : devices.devices()) {
            names[device.index()] = selector(backend, device.index());
            metrics.registerDevice(names[device.index()]);
        }
        return new InferenceObserver() {
            @Override
            public Tracker enqueued(String model, int device) {
                InferenceMetrics.Request request = metrics.enqueued(model, names[device]);
                return new Tracker() {
                    @Override
                    public void started() {
                        request.started();
                    }

                    @Override
                    public void finished(int status) {
                        request.finished(status == CANCELLED ? InferenceOutcome.CANCELLED
                                : InferenceOutcome.ofStatus(status));
                    }
                };
            }

            @Override
            public void rejected(String model, int status) {
                // Never queued: entering and leaving a queue at once counts the outcome and nothing else.
                metrics.enqueued(model == null ? InferenceMetrics.UNKNOWN_MODEL : model, names[0])
                        .finished(status == CANCELLED ? InferenceOutcome.CANCELLED : InferenceOutcome.ofStatus(status));
            }
        };
    }

    /** {@code /actuator/health/models}: UP once the warm-up finished; lists each model's state. */
    @Bean
    ModelsHealthIndicator modelsHealthIndicator(ModelRegistry registry) {
        return new ModelsHealthIndicator(registry::isWarmedUp, () -> {
            Map<String, Object> details = new LinkedHashMap<>();
            for (ServedModel model : registry.models()) {
                details.put(model.name(), model.state());
            }
            for (ModelFailure failure : registry.failures()) {
                details.put(failure.name(), "UNAVAILABLE: " + failure.reason());
            }
            return details;
        });
    }

    /** The statistics extension's figures as meters (see {@link ModelStatisticsMeterBinder}). */
    @Bean
    ModelStatisticsMeterBinder modelStatisticsMeterBinder(ModelRegistry registry) {
        return new ModelStatisticsMeterBinder(name -> {
                    ServedModel model = registry.served(name);
                    return model == null ? null : figures(model);
                },
                () -> registry.models().stream().map(ServedModel::name).toList());
    }

    /** Models loaded at run time get their meters too. */
    @Bean
    GpuPoolConfiguration.ModelLoadListener modelMetersOnLoad(ModelStatisticsMeterBinder binder) {
        return binder::register;
    }

    static ModelFigures figures(ServedModel model) {
        ModelStatistics s = model.statistics();
        return new ModelFigures() {
            @Override
            public String version() {
                return model.version();
            }

            @Override
            public long inferenceCount() {
                return s.inferenceCount();
            }

            @Override
            public long executionCount() {
                return s.executionCount();
            }

            @Override
            public long count(Phase phase) {
                return duration(phase).count();
            }

            @Override
            public long nanos(Phase phase) {
                return duration(phase).nanos();
            }

            private ModelStatistics.Duration duration(Phase phase) {
                return switch (phase) {
                    case SUCCESS -> s.success();
                    case FAIL -> s.fail();
                    case QUEUE -> s.queue();
                    case COMPUTE_INPUT -> s.computeInput();
                    case COMPUTE_INFER -> s.computeInfer();
                    case COMPUTE_OUTPUT -> s.computeOutput();
                };
            }

            @Override
            public long weightBytes() {
                return s.weightBytes();
            }

            @Override
            public long weightPeakBytes() {
                return s.weightPeakBytes();
            }

            @Override
            public long requestBytes() {
                return s.requestBytes();
            }

            @Override
            public long requestPeakBytes() {
                return s.requestPeakBytes();
            }
        };
    }

    static String selector(ComputeBackend backend, int index) {
        return backend.name() + ":" + index;
    }
}
