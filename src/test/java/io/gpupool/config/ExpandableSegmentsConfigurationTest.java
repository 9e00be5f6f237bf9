package io.gpupool.config;

import io.gpupool.backend.ComputeBackend;
import io.gpupool.memory.metric.AllocatorMode;
import io.gpupool.serving.ServingDevices;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.jackson.autoconfigure.JacksonAutoConfiguration;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.boot.test.system.CapturedOutput;
import org.springframework.boot.test.system.OutputCaptureExtension;

import static org.assertj.core.api.Assertions.assertThat;

/** {@code gpupool.memory.expandable-segments}: bound, off by default, ignored with one log line on the host. */
@ExtendWith(OutputCaptureExtension.class)
class ExpandableSegmentsConfigurationTest {

    private static final String IGNORED = "gpupool.memory.expandable-segments=true is ignored";

    private final ApplicationContextRunner runner = new ApplicationContextRunner()
            .withConfiguration(AutoConfigurations.of(JacksonAutoConfiguration.class))
            .withUserConfiguration(GpuPoolConfiguration.class)
            .withPropertyValues("gpupool.backend=host", "gpupool.serving.warm-up=false",
                    "gpupool.models.path=does-not-exist");

    @Test
    void offByDefault(CapturedOutput output) {
        runner.run(context -> {
            assertThat(context).hasNotFailed();
            assertThat(context.getBean(GpuPoolSettings.class).memory().expandableSegments()).isFalse();
        });
        assertThat(output.getAll()).doesNotContain(IGNORED);
    }

    @Test
    void onTheHostItIsIgnoredWithOneLogLineAndThePoolStillServes(CapturedOutput output) {
        runner.withPropertyValues("gpupool.memory.expandable-segments=true", "gpupool.memory.mode=GLOBAL_ONLY")
                .run(context -> {
                    assertThat(context).hasNotFailed();
                    assertThat(context.getBean(GpuPoolSettings.class).memory().expandableSegments()).isTrue();
                    assertThat(context.getBean(ComputeBackend.class).name()).isEqualTo("host");
                    var device = context.getBean(ServingDevices.class).devices().getFirst();
                    assertThat(device.allocator().mode()).isEqualTo(AllocatorMode.GLOBAL_ONLY);
                    device.device().bindToCurrentThread();
                    try (var stream = device.device().createStream(0)) {
                        device.allocator().allocate(4096, stream).release();
                    }
                });
        assertThat(output.getAll().lines().filter(line -> line.contains(IGNORED)))
                .singleElement().asString().contains("host backend");
    }
}
