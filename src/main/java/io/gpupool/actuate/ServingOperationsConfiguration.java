package io.gpupool.actuate;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import io.gpupool.backend.ComputeDevice;
import io.gpupool.memory.DeviceAllocator;
import io.gpupool.memory.DevicePool;
import io.gpupool.memory.trace.TracingAllocator;
import io.gpupool.serving.DeviceRuntime;
import io.gpupool.serving.InferenceObserver;
import io.gpupool.serving.ModelFailure;
import io.gpupool.serving.ModelRegistry;
import io.gpupool.serving.ServedModel;
import io.gpupool.serving.ServingDevices;
import io.micrometer.core.instrument.binder.MeterBinder;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.util.function.SingletonSupplier;

/**
 * Connects the operations layer to what the serving wiring opened: a {@link ManagedPool} for each
 * device whose activation allocator is a {@link DevicePool} (behind the trace decorator or not; see
 * {@link #adapt}), the {@code models} readiness contributor over {@link ModelRegistry#isWarmedUp()},
 * and the serving layer's {@link InferenceObserver} hook feeding {@link InferenceMetrics}.
 *
 * <p>Device selectors are {@code <source>:<index>}, e.g. {@code cuda:0} or {@code host:0}; the same
 * string tags the pool meters and the inference meters of that device.
 */
@Configuration(proxyBeanMethods = false)
public class ServingOperationsConfiguration {

    /** The selector of {@code device}: its chunk source's name, with the index appended when it has none. */
    public static String selector(ComputeDevice device) {
        String name = device.chunkSource().name();
        return name.matches(".*:\\d+") ? name : name + ":" + device.index();
    }

    /** Adapters for the runtimes whose activation allocator is a pool; other strategies have no pool to show. */
    static List<ManagedPool> adapt(List<DeviceRuntime> runtimes) {
        List<ManagedPool> pools = new ArrayList<>();
        for (DeviceRuntime runtime : runtimes) {
            DeviceAllocator allocator = runtime.allocator();
            TracingAllocatorControl trace = null;
            if (allocator instanceof TracingAllocator tracing) {
                trace = new TracingAllocatorControl(tracing);
                allocator = tracing.delegate();
            }
            if (allocator instanceof DevicePool pool) {
                pools.add(new DevicePoolAdapter(selector(runtime.device()), pool,
                        runtime.device().chunkSource().capacityBytes(), trace));
            }
        }
        return pools;
    }

    /** {@code /actuator/health/models}: in the readiness group. */
    @Bean
    public ModelsHealthIndicator modelsHealthIndicator(ObjectProvider<ModelRegistry> registry) {
        return new ModelsHealthIndicator(() -> {
            ModelRegistry r = registry.getIfAvailable();
            return r != null && r.isWarmedUp();
        }, () -> {
            ModelRegistry r = registry.getIfAvailable();
            Map<String, Object> details = new LinkedHashMap<>();
            if (r == null) {
                details.put("reason", "no model registry");
                return details;
            }
            details.put("warmedUp", r.isWarmedUp());
            details.put("served", r.models().stream().map(ServedModel::name).toList());
            Map<String, String> failed = new LinkedHashMap<>();
            for (ModelFailure failure : r.failures()) {
                failed.put(failure.name(), failure.reason());
            }
            details.put("failed", failed);
            return details;
        });
    }

    /** Registers the queue-depth and in-flight gauges of every serving device before its first request. */
    @Bean
    public MeterBinder servingDeviceGauges(InferenceMetrics metrics, ObjectProvider<ServingDevices> devices) {
        return registry -> devices.ifAvailable(serving -> serving.devices()
                .forEach(runtime -> metrics.registerDevice(selector(runtime.device()))));
    }

    /** What {@code InferenceService} reports per request, recorded as the {@code gpupool.inference.*} meters. */
    @Bean
    public InferenceObserver inferenceMetricsObserver(InferenceMetrics metrics, ObjectProvider<ServingDevices> devices) {
        SingletonSupplier<Map<Integer, String>> selectors = SingletonSupplier.of(() -> {
            Map<Integer, String> byIndex = new LinkedHashMap<>();
            devices.ifAvailable(serving -> serving.devices()
                    .forEach(runtime -> byIndex.put(runtime.index(), selector(runtime.device()))));
            return byIndex;
        });
        return (model, device) -> {
            String selector = selectors.obtain().getOrDefault(device, "device:" + device);
            InferenceMetrics.Request request = metrics.enqueued(model, selector);
            return new InferenceObserver.Tracker() {
                @Override
                public void started() {
                    request.started();
                }

                @Override
                public void finished(int status) {
                    request.finished(status == InferenceObserver.CANCELLED ? InferenceOutcome.CANCELLED
                            : InferenceOutcome.ofStatus(status));
                }
            };
        };
    }
}
