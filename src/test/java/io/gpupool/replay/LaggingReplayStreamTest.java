package io.gpupool.replay;

import io.gpupool.memory.trace.Trace;

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
        TraceReplayer.Result instant = TraceReplayer.replay(trace, pool, 64L << 30, 0);
        TraceReplayer.Result lagging = TraceReplayer.replay(trace, pool, 64L << 30, 2000);
        assertThat(lagging.failedAllocations()).isZero();
        assertThat(lagging.peakLiveBytes()).isEqualTo(instant.peakLiveBytes());
        assertThat(lagging.peakReservedBytes()).isGreaterThan(instant.peakReservedBytes());
    }

    /**
     * The no-wait reference: stream 0 frees 10 bytes, then stream 1 and stream 0 each ask for 10. With
     * no lag the freed bytes serve stream 1 at once (10 in all); with a lag stream 1 must grow (20), but
     * stream 0 may reuse its own bytes at once; once the lag passed, they serve another stream.
     */
    @Test
    void theNoWaitReferenceCountsFreedBytesAsSharedOnlyAfterTheLag() {
        Trace trace = new Trace();
        trace.add(1, 0, Trace.ALLOCATE, 0x100, 10, 0);
        trace.add(1, 1, Trace.FREE, 0x100, 10, 0);
        trace.add(1, 2, Trace.ALLOCATE, 0x200, 10, 1);            // another stream, right after the free
        trace.add(1, 3, Trace.ALLOCATE, 0x300, 10, 0);            // the freeing stream itself
        assertThat(TraceReplayer.noWaitPeakBytes(trace, 0)).isEqualTo(TraceReplayer.peakLive(trace)).isEqualTo(20);
        assertThat(TraceReplayer.noWaitPeakBytes(trace, 100)).as("stream 1 grows, stream 0 reuses its own")
                .isEqualTo(20);

        Trace later = new Trace();
        later.add(1, 0, Trace.ALLOCATE, 0x100, 10, 0);
        later.add(1, 1, Trace.FREE, 0x100, 10, 0);
        later.add(1, 2, Trace.ALLOCATE, 0x200, 10, 1);            // before the lag of 3 passed: grows
        later.add(1, 3, Trace.FREE, 0x200, 10, 1);
        later.add(1, 4, Trace.ALLOCATE, 0x300, 10, 2);            // event 4 = 1 + 3: stream 0's bytes are shared
        assertThat(TraceReplayer.noWaitPeakBytes(later, 0)).isEqualTo(10);
        assertThat(TraceReplayer.noWaitPeakBytes(later, 3)).isEqualTo(20);
        assertThat(TraceReplayer.noWaitPeakBytes(later, 4)).as("one event later still in flight: grows again")
                .isEqualTo(30);
    }
}
