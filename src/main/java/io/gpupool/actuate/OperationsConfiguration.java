package io.gpupool.actuate;


import io.gpupool.backend.ComputeBackend;
import io.micrometer.core.instrument.MeterRegistry;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

/**
 * The operations beans: the {@code gpupool} endpoint and its web extension, the pool meters, the
 * inference metrics recorder and the health contributors {@code pool} and {@code device}.
 *
 * <p>Pools are found as {@link ManagedPool} beans, looked up on every call. Whoever opens the device
 * pools (the serving wiring) publishes them, e.g. as {@link DevicePoolAdapter}s.
 */
@Configuration(proxyBeanMethods = false)
public class OperationsConfiguration {

    @Bean
    @ConditionalOnMissingBean
    public ManagedPools managedPools(ObjectProvider<ManagedPool> pools) {
        return new ManagedPools(() -> pools.orderedStream().toList());
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
