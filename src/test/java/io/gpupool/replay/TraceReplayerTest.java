package io.gpupool.replay;

import io.gpupool.memory.trace.Trace;

import io.gpupool.memory.bestfit.BestFitAllocator;
import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class TraceReplayerTest {

    private static final long MIB = 1L << 20;
    private final TraceReplayer.Strategy bestFit =
            new TraceReplayer.Strategy("best-fit-2m", s -> new BestFitAllocator(s, 2 * MIB, false));

    @Test
    void measuresPeakLiveAndPeakReserved() {
        Trace trace = new Trace();
        trace.add(1, 0, Trace.ALLOCATE, 0x1000, MIB, 0);
        trace.add(1, 1, Trace.ALLOCATE, 0x2000, MIB, 1);
        trace.add(1, 2, Trace.FREE, 0x1000, MIB, 0);
        trace.add(1, 3, Trace.ALLOCATE, 0x3000, 3 * MIB, 0);
        trace.add(1, 4, Trace.FREE, 0x9999, 1, 0);            // never allocated: counted, skipped
        trace.add(1, 5, Trace.ALLOCATE_FAILURE, 0, MIB, 0);   // skipped
        trace.add(1, 6, Trace.FREE, 0x2000, MIB, 1);
        trace.add(1, 7, Trace.FREE, 0x3000, 3 * MIB, 0);
        TraceReplayer.Result r = TraceReplayer.replay(trace, bestFit, 1L << 30);
        assertThat(r.peakLiveBytes()).isEqualTo(4 * MIB);
        // 2 MiB chunk holds the two 1 MiB blocks; the 3 MiB block needs a 4 MiB chunk
        assertThat(r.peakReservedBytes()).isEqualTo(6 * MIB);
        assertThat(r.overhead()).isEqualTo(1.5);
        assertThat(r.unmatchedFrees()).isEqualTo(1);
        assertThat(r.allocations()).isEqualTo(3);
        assertThat(r.frees()).isEqualTo(3);
        assertThat(r.chunkAllocations()).isEqualTo(2);
    }

    /** A 5 MiB tensor in 2 MiB units holds 6 MiB: the rounding at the allocated peak says so. */
    @Test
    void reportsTheRoundingAtThePeakOfAllocatedBytes() {
        Trace trace = new Trace();
        trace.add(1, 0, Trace.ALLOCATE, 0x1000, 5 * MIB, 0);
        trace.add(1, 1, Trace.ALLOCATE, 0x2000, 4 * MIB, 0);
        trace.add(1, 2, Trace.FREE, 0x2000, 4 * MIB, 0);
        trace.add(1, 3, Trace.FREE, 0x1000, 5 * MIB, 0);
        TraceReplayer.Result r = TraceReplayer.replay(trace, ReplayStrategies.byName("two-level"), 1L << 30);
        assertThat(r.peakAllocatedBytes()).isEqualTo(10 * MIB);
        assertThat(r.requestedAtPeakAllocated()).isEqualTo(9 * MIB);
        assertThat(r.rounding()).isEqualTo(10.0 / 9);
    }

    @Test
    void refusedAllocationsAreCountedAndTheirFreesSkipped() {
        Trace trace = new Trace();
        trace.add(1, 0, Trace.ALLOCATE, 0x1000, 8 * MIB, 0);
        trace.add(1, 1, Trace.ALLOCATE, 0x2000, 8 * MIB, 0);
        trace.add(1, 2, Trace.FREE, 0x2000, 8 * MIB, 0);
        trace.add(1, 3, Trace.FREE, 0x1000, 8 * MIB, 0);
        TraceReplayer.Result r = TraceReplayer.replay(trace, bestFit, 10 * MIB);
        assertThat(r.failedAllocations()).isEqualTo(1);
        assertThat(r.unmatchedFrees()).isEqualTo(1);
        assertThat(r.peakLiveBytes()).isEqualTo(8 * MIB);
    }

    @Test
    void anInconsistentTraceIsRejectedWithTheEventIndex() {
        Trace trace = new Trace();
        trace.add(1, 0, Trace.ALLOCATE, 0x1000, 100, 0);
        trace.add(1, 1, Trace.ALLOCATE, 0x1000, 100, 0);
        assertThatThrownBy(() -> TraceReplayer.replay(trace, bestFit, 1L << 30))
                .hasMessageContaining("event 1").hasMessageContaining("0x1000");
    }
}
