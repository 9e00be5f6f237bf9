package io.gpupool.config;

import io.gpupool.actuate.AllocatorAdapter;
import io.gpupool.actuate.DevicePoolAdapter;
import io.gpupool.actuate.InferenceMetrics;
import io.gpupool.actuate.InferenceOutcome;
import io.gpupool.actuate.ManagedPool;
import io.gpupool.actuate.ManagedPools;
import io.gpupool.actuate.ModelsHealthIndicator;
import io.gpupool.actuate.TracingAllocatorControl;
import io.gpupool.backend.ComputeBackend;
import io.gpupool.memory.DeviceAllocator;
import io.gpupool.memory.DevicePool;
import io.gpupool.memory.bestfit.BestFitAllocator;
import io.gpupool.memory.trace.TracingAllocator;
import io.gpupool.serving.DeviceRuntime;
import io.gpupool.serving.InferenceObserver;
import io.gpupool.serving.ModelFailure;
import io.gpupool.serving.ModelRegistry;
import io.gpupool.serving.ServedModel;
import io.gpupool.serving.ServingDevices;
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
 * inference meters) and the warm-up state (the {@code models} readiness contributor).
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
            ManagedPool.Kernels kernels = new ManagedPool.Kernels(device.ops().gemmEngine(),
                    device.ops().activationBytes() == 2 ? "bf16" : "fp32");
            pools.add(ManagedPool.withKernels(managedPool(selector(backend, device.index()), device), kernels));
        }
        return ManagedPools.of(pools);
    }

    static ManagedPool managedPool(String selector, DeviceRuntime device) {
        DeviceAllocator allocator = device.allocator();
        TracingAllocatorControl trace = null;
        if (allocator instanceof TracingAllocator tracing) {          // trace recording on the endpoint
            trace = new TracingAllocatorControl(tracing);
            allocator = tracing.delegate();
        }
        if (allocator instanceof DevicePool pool) {
            return new DevicePoolAdapter(selector, pool, device.device().chunkSource().capacityBytes(), trace);
        }
        // Not device.chunkSource(): on CUDA with expandable segments that would reserve address space
        // for a source these modes never use.
        long capacity = device.device().totalMemory();
        if (allocator instanceof BestFitAllocator bestFit) {           // free segments inside its chunks
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
                        .finished(InferenceOutcome.ofStatus(status));
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

    static String selector(ComputeBackend backend, int index) {
        return backend.name() + ":" + index;
    }
}
