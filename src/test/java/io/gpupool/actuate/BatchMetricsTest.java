package io.gpupool.actuate;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import org.junit.jupiter.api.Test;

import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;

/** The gpupool.batch.* meters a Prometheus scrape shows. */
class BatchMetricsTest {

    @Test
    void executionsInferencesSizesTokensAndQueueDelayPerModel() {
        SimpleMeterRegistry registry = new SimpleMeterRegistry();
        BatchMetrics metrics = new BatchMetrics(registry);

        metrics.executed("tiny-bert", 3, 5, 120);
        metrics.executed("tiny-bert", 1, 2, 16);
        metrics.executed("iris-mlp", 1, 4, 4);
        metrics.queueDelay("tiny-bert", 2_000_000);
        metrics.bypassed("tiny-bert");

        assertThat(registry.get("gpupool.batch.executions").tag("model", "tiny-bert").counter().count()).isEqualTo(2);
        assertThat(registry.get("gpupool.batch.inferences").tag("model", "tiny-bert").counter().count()).isEqualTo(7);
        assertThat(registry.get("gpupool.batch.size").tag("model", "tiny-bert").summary().max()).isEqualTo(3);
        assertThat(registry.get("gpupool.batch.tokens").tag("model", "tiny-bert").summary().totalAmount())
                .isEqualTo(136);
        assertThat(registry.get("gpupool.batch.queue.delay").tag("model", "tiny-bert").timer()
                .totalTime(TimeUnit.MILLISECONDS)).isEqualTo(2.0);
        assertThat(registry.get("gpupool.batch.executions").tag("model", "iris-mlp").counter().count()).isEqualTo(1);
        assertThat(registry.get("gpupool.batch.bypassed").tag("model", "tiny-bert").counter().count()).isEqualTo(1);
    }
}
