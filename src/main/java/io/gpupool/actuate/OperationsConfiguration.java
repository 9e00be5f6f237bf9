package io.gpupool.actuate;


import java.util.ArrayList;
import java.util.List;

import io.gpupool.backend.ComputeBackend;
import io.gpupool.serving.ServingDevices;
import io.micrometer.core.instrument.MeterRegistry;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.util.function.SingletonSupplier;

/**
 * The operations beans: the {@code gpupool} endpoint and its web extension, the pool meters, the
 * inference metrics recorder and the health contributors {@code pool} and {@code device}.
 *
 * <p>Pools come from the serving devices and from {@link ManagedPool} beans (tests publish fakes).
 */
@Configuration(proxyBeanMethods = false)
public class OperationsConfiguration {

    /**
     * The pools of the serving devices ({@link ServingOperationsConfiguration#adapt}) plus any
     * {@link ManagedPool} beans. Adapters are built once, on first use (after the devices are open),
     * so trace recordings keep their state between calls.
     */
    @Bean
    public ManagedPools managedPools(ObjectProvider<ServingDevices> devices, ObjectProvider<ManagedPool> beans) {
        SingletonSupplier<List<ManagedPool>> fromDevices = SingletonSupplier.of(() -> {
            ServingDevices serving = devices.getIfAvailable();
            return serving == null ? List.of() : ServingOperationsConfiguration.adapt(serving.devices());
        });
        return new ManagedPools(() -> {
            List<ManagedPool> all = new ArrayList<>(fromDevices.obtain());
            beans.orderedStream().forEach(all::add);
            return all;
        });
    }

    @Bean
    public GpuPoolEndpoint gpuPoolEndpoint(ManagedPools pools) {
        return new GpuPoolEndpoint(pools);
    }

    @Bean
    public GpuPoolEndpointWebExtension gpuPoolEndpointWebExtension(GpuPoolEndpoint endpoint, ManagedPools pools) {
        return new GpuPoolEndpointWebExtension(endpoint, pools);
    }

    @Bean
    public DashboardEndpoint dashboardEndpoint() {
        return new DashboardEndpoint();
    }

    @Bean
    public GpuPoolMeterBinder gpuPoolMeterBinder(ManagedPools pools) {
        return new GpuPoolMeterBinder(pools);
    }

    @Bean
    public InferenceMetrics inferenceMetrics(MeterRegistry registry) {
        return new InferenceMetrics(registry);
    }

    /** {@code /actuator/health/pool}. */
    @Bean
    public PoolHealthIndicator poolHealthIndicator(ManagedPools pools) {
        return new PoolHealthIndicator(pools);
    }

    /** {@code /actuator/health/device}. */
    @Bean
    public DeviceHealthIndicator deviceHealthIndicator(ObjectProvider<ComputeBackend> backends) {
        return new DeviceHealthIndicator(() -> backends.orderedStream()
                .flatMap(backend -> backend.devices().stream())
                .toList());
    }
}
