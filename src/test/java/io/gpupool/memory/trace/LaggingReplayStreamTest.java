package io.gpupool.memory.trace;

import io.gpupool.memory.StreamFence;
import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/** Fences of a lagging replay stream complete a fixed number of trace events after they were recorded. */
class LaggingReplayStreamTest {

    @Test
    void aFenceCompletesLagEventsAfterItWasRecorded() {
        long[] clock = {100};
        LaggingReplayStream stream = new LaggingReplayStream(3, clock, 50);
        StreamFence fence = stream.recordFence();
        clock[0] = 149;
        assertThat(fence.isComplete()).isFalse();
        clock[0] = 150;
        assertThat(fence.isComplete()).isTrue();
        assertThat(stream.ordinal()).isEqualTo(3);
    }

    @Test
    void refusesANonPositiveLag() {
        assertThatThrownBy(() -> new LaggingReplayStream(0, new long[1], 0))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("lagEvents = 0");
    }

    @Test
    void pendingFencesKeepThePoolFromUnmappingSoItHoldsMoreThanWithInstantFences() {
        Trace trace = new InferenceTraceGenerator(InferenceTraceGenerator.Config.bertBase()
                .withRequests(60).withStreams(4)).generate();
        TraceReplayer.Strategy pool = ReplayStrategies.byName("two-level");
        TraceReplayer.Result instant = TraceReplayer.replay(trace, pool,
                io.gpupool.memory.source.SimulatedChunkSource.withMapping("replay", 64L << 30), 0);
        TraceReplayer.Result lagging = TraceReplayer.replay(trace, pool,
                io.gpupool.memory.source.SimulatedChunkSource.withMapping("replay", 64L << 30), 2000);
        assertThat(lagging.failedAllocations()).isZero();
        assertThat(lagging.peakLiveBytes()).isEqualTo(instant.peakLiveBytes());
        assertThat(lagging.peakReservedBytes()).isGreaterThan(instant.peakReservedBytes());
    }
}
