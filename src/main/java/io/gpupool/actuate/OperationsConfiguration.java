package io.gpupool.actuate;


import io.gpupool.backend.ComputeBackend;
import io.micrometer.core.instrument.MeterRegistry;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

/**
 * The operations beans: the {@code gpupool} endpoint and its web extension, the pool meters, the
 * inference metrics recorder and the health contributors {@code pool} and {@code device}.
 *
 * <p>Which pools there are is decided by the serving wiring ({@code config.OperationsWiring}).
 */
@Configuration(proxyBeanMethods = false)
public class OperationsConfiguration {

    /**
     * Pools published as {@link ManagedPool} beans (tests publish fakes). The serving wiring
     * ({@code config.OperationsWiring}) publishes the devices' pools as a primary {@link ManagedPools}.
     */
    @Bean
    public ManagedPools managedPools(ObjectProvider<ManagedPool> pools) {
        return new ManagedPools(() -> pools.orderedStream().toList());
    }

    @Bean
    public GpuPoolEndpoint gpuPoolEndpoint(ManagedPools pools, ObjectProvider<ManagedGraphs> graphs,
                                           ObjectProvider<ManagedBatching> batching) {
        return new GpuPoolEndpoint(pools, graphs.getIfAvailable(() -> ManagedGraphs.NONE),
                batching.getIfAvailable(() -> ManagedBatching.NONE));
    }

    @Bean
    public GpuPoolEndpointWebExtension gpuPoolEndpointWebExtension(GpuPoolEndpoint endpoint, ManagedPools pools) {
        return new GpuPoolEndpointWebExtension(endpoint, pools);
    }

    /** Binds a tuning POST's body to the one {@code PoolTuning} that {@code tune} takes. */
    @Bean
    public TuningBodyBinder tuningBodyBinder(ManagedPools pools) {
        return new TuningBodyBinder(pools);
    }

    @Bean
    public DashboardEndpoint dashboardEndpoint() {
        return new DashboardEndpoint();
    }

    @Bean
    public GpuPoolMeterBinder gpuPoolMeterBinder(ManagedPools pools, ObjectProvider<ManagedGraphs> graphs) {
        return new GpuPoolMeterBinder(pools, graphs.getIfAvailable(() -> ManagedGraphs.NONE));
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
