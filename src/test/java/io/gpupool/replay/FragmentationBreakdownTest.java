package io.gpupool.replay;

import io.gpupool.memory.trace.Trace;
import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;

/** The breakdown at the reservation's peak names memory that waits for a running request's fence. */
class FragmentationBreakdownTest {

    private static final long MIB = 1L << 20;

    /** Stream 0 frees 40 MiB while its request still runs; stream 1 then asks for 40 MiB. */
    private static Trace trace() {
        Trace trace = new Trace();
        trace.add(1, 0, Trace.ALLOCATE, 0x1000, 40 * MIB, 0);
        trace.add(1, 1, Trace.ALLOCATE, 0x2000, 8 * MIB, 0);    // keeps stream 0's request running
        trace.add(1, 2, Trace.FREE, 0x1000, 40 * MIB, 0);
        trace.add(1, 3, Trace.ALLOCATE, 0x3000, 40 * MIB, 1);
        trace.add(1, 4, Trace.FREE, 0x3000, 40 * MIB, 1);
        trace.add(1, 5, Trace.FREE, 0x2000, 8 * MIB, 0);
        return trace;
    }

    @Test
    void memoryFreedDuringARunningRequestShowsAsFencedAtThePeak() {
        FragmentationBreakdown.Breakdown atPeak = FragmentationBreakdown.atPeak(trace(),
                ReplayStrategies.byName("global-only"), 1L << 30, new FenceTiming.RequestEnd());
        assertThat(atPeak.reserved()).as("stream 1 maps its own 40 MiB rather than wait").isEqualTo(88 * MIB);
        assertThat(atPeak.live()).isEqualTo(48 * MIB);
        assertThat(atPeak.fencedFree()).isEqualTo(40 * MIB);
        assertThat(atPeak.rest()).isZero();
    }

    @Test
    void withFencesCompleteAtOnceNothingIsFencedAndLessIsHeld() {
        FragmentationBreakdown.Breakdown atPeak = FragmentationBreakdown.atPeak(trace(),
                ReplayStrategies.byName("global-only"), 1L << 30);
        assertThat(atPeak.reserved()).isLessThan(88 * MIB);
        assertThat(atPeak.fencedFree()).isZero();
        assertThat(atPeak.rest()).isZero();
    }
}
