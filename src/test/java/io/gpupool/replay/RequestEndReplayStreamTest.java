package io.gpupool.replay;

import io.gpupool.memory.trace.Trace;

import io.gpupool.memory.StreamFence;
import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/** Fences that complete when the recording stream's request ends (the server's end-of-request synchronisation). */
class RequestEndReplayStreamTest {

    @Test
    void aFenceCompletesOnceItsStreamsRequestEnded() {
        RequestEndReplayStream stream = new RequestEndReplayStream(2);
        stream.allocated(10);
        StreamFence early = stream.recordFence();
        assertThat(early.isComplete()).isFalse();
        stream.requestEnded();
        assertThat(early.isComplete()).isTrue();
        StreamFence next = stream.recordFence();
        assertThat(next.isComplete()).as("recorded in the next request").isFalse();
    }

    @Test
    void aFenceRecordedBetweenRequestsIsCompleteAtOnce() {
        RequestEndReplayStream stream = new RequestEndReplayStream(1);
        stream.allocated(10);
        stream.freed(10);
        assertThat(stream.recordFence().isComplete()).as("nothing queued since the request's synchronisation").isTrue();
    }

    @Test
    void theRequestEndsWhenTheStreamsLiveBytesReturnToZero() {
        RequestEndReplayStream stream = new RequestEndReplayStream(0);
        stream.allocated(10);
        stream.allocated(20);
        stream.freed(10);
        StreamFence fence = stream.recordFence();
        assertThat(fence.isComplete()).as("20 bytes still live: the request runs").isFalse();
        stream.freed(20);
        assertThat(fence.isComplete()).isTrue();
    }

    @Test
    void fenceTimingParsesANumberOrRequestAndNamesTheOptionOtherwise() {
        assertThat(FenceTiming.parse("0")).isEqualTo(FenceTiming.IMMEDIATE);
        assertThat(FenceTiming.parse("500")).isEqualTo(new FenceTiming.Lag(500));
        assertThat(FenceTiming.parse("request")).isEqualTo(new FenceTiming.RequestEnd());
        assertThatThrownBy(() -> FenceTiming.parse("soon")).hasMessageContaining("--fence-lag 'soon'");
        assertThatThrownBy(() -> FenceTiming.parse("-1")).hasMessageContaining("fence lag = -1");
    }

    /**
     * Stream 0 frees 10 bytes in the middle of its request, and stream 1 asks for 10 while that request
     * still runs: the no-wait reference must grow. Once stream 0's request ended, its 20 freed bytes
     * serve stream 1's next 10 without growing.
     */
    @Test
    void theNoWaitReferenceSharesAStreamsFreesWhenItsRequestEnds() {
        Trace trace = new Trace();
        trace.add(1, 0, Trace.ALLOCATE, 0x100, 10, 0);
        trace.add(1, 1, Trace.ALLOCATE, 0x200, 10, 0);
        trace.add(1, 2, Trace.FREE, 0x100, 10, 0);                // mid-request
        trace.add(1, 3, Trace.ALLOCATE, 0x300, 10, 1);            // grows: stream 0 still runs
        trace.add(1, 4, Trace.FREE, 0x200, 10, 0);                // stream 0's request ends
        trace.add(1, 5, Trace.ALLOCATE, 0x400, 10, 1);            // from stream 0's freed bytes
        assertThat(TraceReplayer.noWaitPeakBytes(trace, FenceTiming.IMMEDIATE)).isEqualTo(20);
        assertThat(TraceReplayer.noWaitPeakBytes(trace, new FenceTiming.RequestEnd())).isEqualTo(30);
    }

    /** The pool replayed with request-end fences: no failure, the same live peak, more reserved than at once. */
    @Test
    void theReplayHoldsMoreWhileOtherStreamsRequestsRun() {
        Trace trace = new InferenceTraceGenerator(InferenceTraceGenerator.Config.bertBase()
                .withRequests(60).withStreams(4)).generate();
        TraceReplayer.Strategy pool = ReplayStrategies.byName("two-level");
        TraceReplayer.Result instant = TraceReplayer.replay(trace, pool, 64L << 30, FenceTiming.IMMEDIATE);
        TraceReplayer.Result atEnd = TraceReplayer.replay(trace, pool, 64L << 30, new FenceTiming.RequestEnd());
        assertThat(atEnd.failedAllocations()).isZero();
        assertThat(atEnd.peakLiveBytes()).isEqualTo(instant.peakLiveBytes());
        assertThat(atEnd.peakReservedBytes()).isGreaterThan(instant.peakReservedBytes());
        assertThat(instant.crossStreamWaits()).isZero();
    }

    @Test
    void aRequestEndPassesTheMarksTakenDuringTheRequestAndMarksBetweenRequestsPassAtOnce() {
        RequestEndReplayStream stream = new RequestEndReplayStream(0);
        assertThat(stream.synchronizedSince(stream.syncMark())).as("between requests nothing is queued").isTrue();
        stream.allocated(100);
        stream.allocated(50);
        long during = stream.syncMark();
        stream.freed(50);
        assertThat(stream.synchronizedSince(during)).as("the request still runs").isFalse();
        stream.freed(100);                                     // the request's last block: it ended
        assertThat(stream.synchronizedSince(during)).isTrue();
    }
}
