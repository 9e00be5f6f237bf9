package io.gpupool.config;

import io.gpupool.actuate.BatchMetrics;
import io.gpupool.memory.MemoryAdmission;
import io.gpupool.memory.pool.DevicePool;
import io.gpupool.serving.BatchObserver;
import io.gpupool.serving.BatchStatistics;
import io.gpupool.serving.DeviceRuntime;
import io.gpupool.serving.DynamicBatcher;
import io.gpupool.serving.ServingDevices;
import io.micrometer.core.instrument.MeterRegistry;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.boot.context.properties.EnableConfigurationProperties;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

import java.util.HashMap;
import java.util.Map;
import java.util.function.LongSupplier;

/**
 * Dynamic batching: the server-wide defaults ({@code gpupool.batching.*}), the batcher in front of the devices
 * and the execution statistics. A batch's headroom on a device is what the memory admission has left beside
 * the admitted requests' planned peaks (without admission: the pool's cap in force minus the bytes the pool
 * hands out now; weights live in their own allocator either way), so a batch whose planned peak would pass
 * the cap is split before it starts rather than answered 507.
 */
@Configuration(proxyBeanMethods = false)
@EnableConfigurationProperties(BatchingProperties.class)
public class BatchingConfiguration {

    @Bean
    BatchStatistics batchStatistics(ObjectProvider<MeterRegistry> registry) {
        MeterRegistry meters = registry.getIfAvailable();
        if (meters == null) {
            return new BatchStatistics();
        }
        BatchMetrics metrics = new BatchMetrics(meters);
        return new BatchStatistics(new BatchObserver() {
            @Override
            public void executed(String model, int requests, int rows, int tokens) {
                metrics.executed(model, requests, rows, tokens);
            }

            @Override
            public void queueDelay(String model, long nanos) {
                metrics.queueDelay(model, nanos);
            }

            @Override
            public void bypassed(String model) {
                metrics.bypassed(model);
            }
        });
    }

    @Bean(destroyMethod = "close")
    DynamicBatcher dynamicBatcher(ServingDevices devices, BatchingProperties properties, GpuPoolSettings settings,
                                  BatchStatistics statistics) {
        Map<Integer, LongSupplier> headroom = new HashMap<>();
        for (DeviceRuntime device : devices.devices()) {
            headroom.put(device.index(), headroom(device, settings));
        }
        return new DynamicBatcher(devices.devices(), properties.toDefaults(), settings.serving().queueCapacity(),
                headroom, statistics, null, properties.batchesPerDevice());
    }

    static LongSupplier headroom(DeviceRuntime device, GpuPoolSettings settings) {
        MemoryAdmission admission = device.worker().admission();
        if (admission.enabled()) {
            // What fits beside the admitted requests' planned peaks: a batch sized to it is admitted at once.
            return admission::availableBytes;
        }
        DevicePool pool = device.allocator().capability(DevicePool.class).orElse(null);
        if (pool != null) {
            long capacity = device.device().chunkSource().capacityBytes();
            // The cap is tunable at runtime: read the configuration in force at each batch.
            return () -> pool.config().effectiveCapBytes(capacity) - pool.metrics().allocatedBytes();
        }
        long cap = settings.memory().pool().effectiveCapBytes(device.device().totalMemory());
        return () -> cap - device.allocator().metrics().allocatedBytes();
    }
}
