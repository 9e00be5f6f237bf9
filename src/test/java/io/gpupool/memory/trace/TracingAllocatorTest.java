package io.gpupool.memory.trace;

import io.gpupool.replay.ReplayStrategies;
import io.gpupool.replay.ReplayStream;
import io.gpupool.replay.TraceReplayer;

import io.gpupool.memory.DeviceBlock;
import io.gpupool.memory.bestfit.BestFitAllocator;
import io.gpupool.replay.SimulatedChunkSource;
import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;

class TracingAllocatorTest {

    private final ReplayStream s0 = new ReplayStream(0);
    private final ReplayStream s3 = new ReplayStream(3);

    @Test
    void recordsAllocationsAndFreesOnlyWhileRecording() {
        try (TracingAllocator tracing = new TracingAllocator(
                new BestFitAllocator(new SimulatedChunkSource("dev", 1L << 32)), 100)) {
            DeviceBlock before = tracing.allocate(1000, s0); // not recording: not traced
            tracing.startRecording();
            DeviceBlock a = tracing.allocate(5000, s3);
            DeviceBlock b = tracing.allocate(70, s0);
            a.retain();
            a.release(); // still one reference: no free event
            a.release();
            before.release(); // allocated before recording: its free is not traced
            tracing.stopRecording();
            b.release(); // freed after stop: not traced
            Trace trace = tracing.drain();
            assertThat(trace.size()).isEqualTo(3);
            assertThat(trace.action(0)).isEqualTo(Trace.ALLOCATE);
            assertThat(trace.bytes(0)).isEqualTo(5000);
            assertThat(trace.stream(0)).isEqualTo(3);
            assertThat(trace.pointer(0)).isEqualTo(a.address());
            assertThat(trace.action(1)).isEqualTo(Trace.ALLOCATE);
            assertThat(trace.action(2)).isEqualTo(Trace.FREE);
            assertThat(trace.pointer(2)).isEqualTo(a.address());
            assertThat(trace.thread(2)).isEqualTo(Thread.currentThread().threadId());
        }
    }

    @Test
    void theBufferIsBoundedAndCountsWhatItDropped() {
        try (TracingAllocator tracing = new TracingAllocator(
                new BestFitAllocator(new SimulatedChunkSource("dev", 1L << 32)), 10)) {
            tracing.startRecording();
            for (int i = 0; i < 20; i++) {
                tracing.allocate(256, s0).release();
            }
            assertThat(tracing.recorder().recorded()).isEqualTo(10);
            assertThat(tracing.recorder().dropped()).isEqualTo(30);
        }
    }

    @Test
    void aRecordedTraceReplaysToTheSamePeakLive() {
        Trace trace;
        try (TracingAllocator tracing = new TracingAllocator(
                new BestFitAllocator(new SimulatedChunkSource("dev", 1L << 32)), 1000)) {
            tracing.startRecording();
            DeviceBlock a = tracing.allocate(3_000_000, s0);
            DeviceBlock b = tracing.allocate(1_000_000, s3);
            a.release();
            DeviceBlock c = tracing.allocate(500_000, s0);
            b.release();
            c.release();
            trace = tracing.drain();
        }
        TraceReplayer.Result result = TraceReplayer.replay(trace, ReplayStrategies.byName("best-fit"), 1L << 32);
        assertThat(result.peakLiveBytes()).isEqualTo(4_000_000);
        assertThat(result.allocations()).isEqualTo(3);
        assertThat(result.frees()).isEqualTo(3);
    }
}
