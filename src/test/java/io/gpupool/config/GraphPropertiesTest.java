package io.gpupool.config;

import org.junit.jupiter.api.Test;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.jackson.autoconfigure.JacksonAutoConfiguration;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;

import static org.assertj.core.api.Assertions.assertThat;

/** {@code gpupool.kernels.graphs.*}: validated at start with the property named; the host has no graphs. */
class GraphPropertiesTest {

    private final ApplicationContextRunner runner = new ApplicationContextRunner()
            .withConfiguration(AutoConfigurations.of(JacksonAutoConfiguration.class))
            .withUserConfiguration(GpuPoolConfiguration.class)
            .withPropertyValues("gpupool.backend=host", "gpupool.serving.warm-up=false",
                    "gpupool.models.path=does-not-exist");

    @Test
    void theHostBackendHasNoGraphsWhateverTheSettings() {
        runner.withPropertyValues("gpupool.kernels.graphs.enabled=true").run(context -> {
            assertThat(context).hasNotFailed();
            assertThat(context.getBean(DeviceGraphSet.class).byDevice()).isEmpty();
        });
    }

    @Test
    void aCountOutOfRangeStopsTheStartNamingTheProperty() {
        runner.withPropertyValues("gpupool.kernels.graphs.max-count=-1").run(context ->
                assertThat(context).getFailure().rootCause()
                        .hasMessageContaining("gpupool.kernels.graphs.max-count = -1")
                        .hasMessageContaining("0 to 4096"));
    }

    @Test
    void bucketsThatDoNotAscendStopTheStartNamingTheProperty() {
        runner.withPropertyValues("gpupool.kernels.graphs.sequence-buckets=32,16").run(context ->
                assertThat(context).getFailure().rootCause()
                        .hasMessageContaining("gpupool.kernels.graphs.sequence-buckets")
                        .hasMessageContaining("ascending"));
        runner.withPropertyValues("gpupool.kernels.graphs.batch-buckets=0,4").run(context ->
                assertThat(context).getFailure().rootCause()
                        .hasMessageContaining("gpupool.kernels.graphs.batch-buckets"));
        runner.withPropertyValues("gpupool.kernels.graphs.token-buckets=64,64").run(context ->
                assertThat(context).getFailure().rootCause()
                        .hasMessageContaining("gpupool.kernels.graphs.token-buckets")
                        .hasMessageContaining("ascending"));
    }

    @Test
    void noTokenBucketsIsAllowedAndMeansBatchesRunEagerly() {
        runner.withPropertyValues("gpupool.kernels.graphs.token-buckets=").run(context ->
                assertThat(context).hasNotFailed());
    }
}
