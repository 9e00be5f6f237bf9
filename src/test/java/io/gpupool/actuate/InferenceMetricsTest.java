package io.gpupool.actuate;

import static org.assertj.core.api.Assertions.assertThat;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import org.junit.jupiter.api.Test;

class InferenceMetricsTest {

    final SimpleMeterRegistry registry = new SimpleMeterRegistry();
    final InferenceMetrics metrics = new InferenceMetrics(registry);

    private double count(String model, InferenceOutcome outcome) {
        return registry.get("gpupool.inference.requests").tag("model", model).tag("outcome", outcome.tag())
                .counter().count();
    }

    @Test
    void queueDepthAndInFlightFollowEachRequestThroughItsLife() {
        InferenceMetrics.Request a = metrics.enqueued("bert", "cuda:0");
        InferenceMetrics.Request b = metrics.enqueued("bert", "cuda:0");
        assertThat(metrics.queueDepth("cuda:0")).isEqualTo(2);
        a.started();
        assertThat(metrics.queueDepth("cuda:0")).isEqualTo(1);
        assertThat(metrics.inFlight("cuda:0")).isEqualTo(1);
        assertThat(registry.get("gpupool.inference.queue.depth").tag("device", "cuda:0").gauge().value()).isEqualTo(1);
        a.finished(InferenceOutcome.SUCCESS);
        b.finished(InferenceOutcome.CANCELLED); // cancelled while queued: never computed
        assertThat(metrics.queueDepth("cuda:0")).isZero();
        assertThat(metrics.inFlight("cuda:0")).isZero();
        assertThat(count("bert", InferenceOutcome.SUCCESS)).isEqualTo(1);
        assertThat(count("bert", InferenceOutcome.CANCELLED)).isEqualTo(1);
        assertThat(registry.get("gpupool.inference.compute").tag("model", "bert").timer().count()).isEqualTo(1);
        assertThat(registry.get("gpupool.inference.queue.wait").tag("model", "bert").timer().count()).isEqualTo(1);
    }

    @Test
    void aSecondFinishIsIgnoredSoRacesCountOnce() {
        InferenceMetrics.Request r = metrics.enqueued("mlp", "host:0");
        r.started();
        r.finished(InferenceOutcome.TIMEOUT);
        r.finished(InferenceOutcome.CANCELLED);
        assertThat(count("mlp", InferenceOutcome.TIMEOUT)).isEqualTo(1);
        assertThat(count("mlp", InferenceOutcome.CANCELLED)).isZero();
        assertThat(metrics.inFlight("host:0")).isZero();
    }

    @Test
    void httpStatusesMapToOutcomes() {
        assertThat(InferenceOutcome.ofStatus(200)).isEqualTo(InferenceOutcome.SUCCESS);
        assertThat(InferenceOutcome.ofStatus(400)).isEqualTo(InferenceOutcome.BAD_REQUEST);
        assertThat(InferenceOutcome.ofStatus(404)).isEqualTo(InferenceOutcome.NOT_FOUND);
        assertThat(InferenceOutcome.ofStatus(413)).isEqualTo(InferenceOutcome.TOO_LARGE);
        assertThat(InferenceOutcome.ofStatus(503)).isEqualTo(InferenceOutcome.OVERLOADED);
        assertThat(InferenceOutcome.ofStatus(504)).isEqualTo(InferenceOutcome.TIMEOUT);
        assertThat(InferenceOutcome.ofStatus(507)).isEqualTo(InferenceOutcome.OUT_OF_MEMORY);
        assertThat(InferenceOutcome.ofStatus(500)).isEqualTo(InferenceOutcome.ERROR);
    }
}
