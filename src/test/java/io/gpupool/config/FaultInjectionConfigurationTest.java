package io.gpupool.config;

import io.gpupool.backend.DeviceStream;
import io.gpupool.memory.DeviceBlock;
import io.gpupool.memory.DeviceAllocator;
import io.gpupool.memory.OutOfDeviceMemoryException;
import io.gpupool.serving.DeviceRuntime;
import io.gpupool.serving.ServingDevices;
import org.junit.jupiter.api.Test;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.jackson.autoconfigure.JacksonAutoConfiguration;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * {@code gpupool.memory.fault-injection.*}: off by default, refuses chunk requests when on (armed once
 * the warm-up finished or was skipped, as here), validated.
 */
class FaultInjectionConfigurationTest {

    private final ApplicationContextRunner runner = new ApplicationContextRunner()
            .withConfiguration(AutoConfigurations.of(JacksonAutoConfiguration.class))
            .withUserConfiguration(GpuPoolConfiguration.class)
            .withPropertyValues("gpupool.backend=host", "gpupool.serving.warm-up=false",
                    "gpupool.models.path=does-not-exist");

    @Test
    void everyChunkRequestFailsAtProbabilityOneAndTheAllocatorReportsOutOfMemory() {
        runner.withPropertyValues("gpupool.memory.fault-injection.probability=1")
                .run(context -> {
                    assertThat(context).hasNotFailed();
                    DeviceRuntime device = context.getBean(ServingDevices.class).devices().getFirst();
                    DeviceAllocator pool = device.allocator();
                    DeviceStream stream = device.device().createStream(0);
                    assertThatThrownBy(() -> pool.allocate(1 << 20, stream))
                            .isInstanceOf(OutOfDeviceMemoryException.class);
                    assertThat(pool.metrics().allocatedBytes()).isZero();
                    assertThat(context.getBean(FaultInjection.class).injectedFailures()).isPositive();
                });
    }

    @Test
    void offByDefault() {
        runner.run(context -> {
            DeviceRuntime device = context.getBean(ServingDevices.class).devices().getFirst();
            DeviceAllocator pool = device.allocator();
            DeviceBlock block = pool.allocate(1 << 20, device.device().createStream(0));
            assertThat(pool.metrics().allocatedBytes()).isPositive();
            block.release();
            assertThat(pool.metrics().counters().failures()).isZero();
        });
    }

    @Test
    void probabilityOutsideZeroToOneIsRejectedNamingTheProperty() {
        runner.withPropertyValues("gpupool.memory.fault-injection.probability=1.5")
                .run(context -> assertThat(context).getFailure().rootCause()
                        .hasMessage("gpupool.memory.fault-injection.probability = 1.5 is invalid; allowed: [0, 1] (0 = off)"));
    }
}
