package io.gpupool.config;

import io.gpupool.backend.ComputeBackend;
import io.gpupool.memory.ReclaimOrder;
import io.gpupool.memory.metric.AllocatorMode;
import io.gpupool.serving.ModelRegistry;
import io.gpupool.serving.ServedModel;
import io.gpupool.serving.ServingDevices;
import org.junit.jupiter.api.Test;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.jackson.autoconfigure.JacksonAutoConfiguration;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;

import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;

/** The wiring: which backend, allocator, streams and models a set of properties produces. */
class GpuPoolConfigurationTest {

    private final ApplicationContextRunner runner = new ApplicationContextRunner()
            .withConfiguration(AutoConfigurations.of(JacksonAutoConfiguration.class))
            .withUserConfiguration(GpuPoolConfiguration.class)
            .withPropertyValues("gpupool.backend=host", "gpupool.serving.warm-up=false");

    @Test
    void hostBackendWithTheShippedModels() {
        runner.withPropertyValues("gpupool.memory.mode=DIRECT", "gpupool.serving.streams-per-device=3")
                .run(context -> {
                    assertThat(context).hasNotFailed();
                    assertThat(context.getBean(ComputeBackend.class).name()).isEqualTo("host");
                    ServingDevices devices = context.getBean(ServingDevices.class);
                    assertThat(devices.devices()).hasSize(1);
                    assertThat(devices.devices().getFirst().allocator().mode()).isEqualTo(AllocatorMode.DIRECT);
                    assertThat(devices.devices().getFirst().worker().streams()).hasSize(3);
                    assertThat(context.getBean(ModelRegistry.class).models()).extracting(ServedModel::name)
                            .contains("iris-mlp", "tiny-bert");
                });
    }

    @Test
    void requestArenasAreOnByDefaultAndTheSettingReachesEveryLoadedModel() {
        // With an arena a forward's one allocation is its whole planned peak; without, its largest tensor.
        java.util.function.Function<org.springframework.context.ApplicationContext, List<Boolean>> oneBlock = context ->
                context.getBean(ModelRegistry.class).models().stream()
                        .map(model -> (io.gpupool.model.PlannedMemory) model.replicas().values().iterator().next())
                        .map(planned -> planned.largestActivationBytes(2, 16) == planned.peakActivationBytes(2, 16))
                        .toList();
        runner.run(context -> assertThat(oneBlock.apply(context)).hasSize(2).containsOnly(true));
        runner.withPropertyValues("gpupool.serving.request-arena=false")
                .run(context -> assertThat(oneBlock.apply(context)).hasSize(2).containsOnly(false));
    }

    @Test
    void poolModesGetThePool() {
        runner.withPropertyValues("gpupool.memory.mode=GLOBAL_ONLY", "gpupool.models.path=does-not-exist",
                        "gpupool.memory.wait-beyond-budget=true", "gpupool.memory.reclaim-order=COLDEST_IN_ORDER",
                        "gpupool.memory.reclaim-hysteresis=0")
                .run(context -> {
                    assertThat(context).hasNotFailed();
                    ServingDevices devices = context.getBean(ServingDevices.class);
                    assertThat(devices.devices().getFirst().allocator())
                            .isInstanceOfSatisfying(io.gpupool.memory.trace.TracingAllocator.class,
                                    tracing -> assertThat(tracing.delegate()).isInstanceOfSatisfying(
                                            io.gpupool.memory.pool.DevicePool.class,
                                            pool -> assertThat(pool.config()).satisfies(
                                                    c -> assertThat(c.waitBeyondBudget()).isTrue(),
                                                    c -> assertThat(c.reclaimOrder()).isEqualTo(ReclaimOrder.COLDEST_IN_ORDER),
                                                    c -> assertThat(c.reclaimHysteresis()).isZero())));
                    assertThat(devices.devices().getFirst().allocator().mode()).isEqualTo(AllocatorMode.GLOBAL_ONLY);
                    assertThat(context.getBean(ModelRegistry.class).models()).isEmpty();
                });
    }

    @Test
    void memoryAdmissionIsOnForAPoolByDefaultAndCanBeSwitchedOff() {
        runner.withPropertyValues("gpupool.models.path=does-not-exist", "gpupool.memory.cap-bytes=64MB")
                .run(context -> {
                    io.gpupool.memory.MemoryAdmission admission =
                            context.getBean(ServingDevices.class).devices().getFirst().worker().admission();
                    assertThat(admission.enabled()).isTrue();
                    assertThat(admission.ceilingBytes()).isEqualTo(64L << 20);
                });
        runner.withPropertyValues("gpupool.models.path=does-not-exist", "gpupool.memory.admission.enabled=false")
                .run(context -> assertThat(context.getBean(ServingDevices.class).devices().getFirst().worker()
                        .admission().enabled()).isFalse());
        runner.withPropertyValues("gpupool.models.path=does-not-exist", "gpupool.memory.mode=DIRECT")
                .run(context -> assertThat(context.getBean(ServingDevices.class).devices().getFirst().worker()
                        .admission().enabled()).as("no pool cap to wait under").isFalse());
    }

    @Test
    void cudaAsyncIsRefusedOnTheHostNamingTheProperty() {
        runner.withPropertyValues("gpupool.memory.mode=CUDA_ASYNC", "gpupool.models.path=does-not-exist")
                .run(context -> assertThat(context).getFailure().rootCause()
                        .hasMessageContaining("gpupool.memory.mode=CUDA_ASYNC is not offered by device 0"));
    }

    @Test
    void badServingValueNamesPropertyValueAndRange() {
        runner.withPropertyValues("gpupool.serving.streams-per-device=0")
                .run(context -> assertThat(context).getFailure().rootCause()
                        .hasMessage("gpupool.serving.streams-per-device = 0 is invalid; allowed: [1, 256]"));
    }

    @Test
    void theMaintenanceIntervalIsSetAndOutOfRangeValuesAreRefusedByName() {
        runner.withPropertyValues("gpupool.models.path=does-not-exist", "gpupool.memory.maintenance-interval=100ms")
                .run(context -> assertThat(context).hasNotFailed().hasSingleBean(PoolMaintenance.class));
        runner.withPropertyValues("gpupool.memory.maintenance-interval=5ms")
                .run(context -> assertThat(context).getFailure().rootCause()
                        .hasMessage("gpupool.memory.maintenance-interval = 5ms is invalid; allowed: 10ms to 1m"));
        runner.withPropertyValues("gpupool.memory.maintenance-interval=2m")
                .run(context -> assertThat(context).getFailure().rootCause()
                        .hasMessage("gpupool.memory.maintenance-interval = 120000ms is invalid; allowed: 10ms to 1m"));
    }

    @Test
    void badMemoryValueNamesOurPropertyNotThePoolField() {
        runner.withPropertyValues("gpupool.memory.min-block-bytes=3MB")
                .run(context -> assertThat(context).getFailure().rootCause()
                        .hasMessageStartingWith("gpupool.memory.min-block-bytes = 3145728 is invalid"));
        runner.withPropertyValues("gpupool.memory.growth-policy=LAZY", "gpupool.memory.initial-bytes=64MB")
                .run(context -> assertThat(context).getFailure().rootCause()
                        .hasMessageContaining("gpupool.memory.initial-bytes = 67108864 is invalid"));
        runner.withPropertyValues("gpupool.memory.mapped-slack=2")
                .run(context -> assertThat(context).getFailure().rootCause()
                        .hasMessage("gpupool.memory.mapped-slack = 2.0 is invalid; allowed: [0, 1]"));
        runner.withPropertyValues("gpupool.memory.mapped-extent-bytes=3MB")
                .run(context -> assertThat(context).getFailure().rootCause()
                        .hasMessage("gpupool.memory.mapped-extent-bytes = 3145728 is invalid; allowed: a power of two"
                                + " in [2097152, 16777216]"));
        runner.withPropertyValues("gpupool.memory.min-block-bytes=32MB")     // the default extent follows the blocks
                .run(context -> assertThat(context).hasNotFailed());
        runner.withPropertyValues("gpupool.memory.max-block-bytes=4MB")
                .run(context -> assertThat(context).hasNotFailed());
    }

    @Test
    void everyPoolSettingIsThePropertyNamedAfterItsPoolConfigComponent() throws Exception {
        for (java.lang.reflect.RecordComponent component : io.gpupool.memory.PoolConfig.class.getRecordComponents()) {
            String name = component.getName();
            if (name.equals("mode")) {
                continue; // gpupool.memory.mode chooses among more allocators than the pool's two modes
            }
            String accessor = (component.getType() == boolean.class ? "is" : "get")
                    + Character.toUpperCase(name.charAt(0)) + name.substring(1);
            assertThat(GpuPoolProperties.Memory.class.getMethod(accessor)).as("property for %s", name).isNotNull();
        }
        assertThat(MemorySettings.kebab("localCacheBytesPerStream")).isEqualTo("local-cache-bytes-per-stream");
        runner.withPropertyValues("gpupool.memory.cap-bytes=1MB", "gpupool.memory.local-cache-bytes-per-stream=32MB")
                .run(context -> assertThat(context).getFailure().rootCause()
                        .hasMessage("gpupool.memory.cap-bytes = 1048576 is invalid; allowed: 0 (use capFraction) or at "
                                + "least minBlockBytes (2097152)"));
    }
}
