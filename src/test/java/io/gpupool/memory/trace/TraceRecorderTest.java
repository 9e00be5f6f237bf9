package io.gpupool.memory.trace;

import io.gpupool.replay.ReplayStrategies;
import io.gpupool.replay.TraceReplayer;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.StringWriter;
import java.nio.charset.StandardCharsets;

import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;

/** The recorder's bound, reads that do not consume, and the CSV it streams. */
class TraceRecorderTest {

    static final long ADDRESS = 0x7f12_3456_0000L;

    private static Trace read(InputStream csv) throws IOException {
        try (BufferedReader in = new BufferedReader(new InputStreamReader(csv, StandardCharsets.UTF_8))) {
            return Trace.read(in, "download");
        }
    }

    @Test
    void holdsAtMostItsCapacityAcrossSegmentsAndReadsDoNotConsume() throws IOException {
        TraceRecorder recorder = new TraceRecorder(70_000); // more than one segment
        recorder.start();
        for (int i = 0; i < 100_000; i++) {
            recorder.record(Trace.ALLOCATE, ADDRESS + 4096L * i, 4096, 0);
        }
        assertThat(recorder.recorded()).isEqualTo(70_000);
        assertThat(recorder.dropped()).isEqualTo(30_000);
        Trace first = read(recorder.snapshot().csv(true));
        Trace second = read(recorder.snapshot().csv(true));
        assertThat(first.size()).isEqualTo(70_000);
        assertThat(second.size()).isEqualTo(70_000);
        assertThat(first.pointer(69_999)).isEqualTo(ADDRESS + 4096L * 69_999);
        recorder.start(); // already recording: keeps what it has
        assertThat(recorder.recorded()).isEqualTo(70_000);
    }

    @Test
    void aSnapshotStaysTheSameWhileRecordingGoesOn() throws IOException {
        TraceRecorder recorder = new TraceRecorder(1000);
        recorder.start();
        recorder.record(Trace.ALLOCATE, ADDRESS, 64, 1);
        TraceRecorder.Snapshot snapshot = recorder.snapshot();
        recorder.record(Trace.FREE, ADDRESS, 64, 1);
        recorder.clear();
        recorder.record(Trace.ALLOCATE, ADDRESS, 128, 1);
        assertThat(snapshot.size()).isEqualTo(1);
        assertThat(read(snapshot.csv(true)).bytes(0)).isEqualTo(64);
        assertThat(recorder.recorded()).isEqualTo(1);
    }

    @Test
    void addressesAreHiddenUnlessAskedButStillPairAllocationsWithFrees() throws IOException {
        TraceRecorder recorder = new TraceRecorder(1000);
        recorder.start();
        recorder.record(Trace.ALLOCATE, ADDRESS, 3_000_000, 0);
        recorder.record(Trace.ALLOCATE, ADDRESS + 0x400000, 1_000_000, 1);
        recorder.record(Trace.FREE, ADDRESS, 3_000_000, 0);
        recorder.record(Trace.ALLOCATE_FAILURE, 0, 1L << 40, 1);
        recorder.record(Trace.FREE, ADDRESS + 0x400000, 1_000_000, 1);
        String hidden = new String(recorder.snapshot().csv(false).readAllBytes(), StandardCharsets.UTF_8);
        assertThat(hidden).doesNotContain(Long.toHexString(ADDRESS)).doesNotContain(Long.toHexString(ADDRESS + 0x400000));
        Trace trace = read(recorder.snapshot().csv(false));
        assertThat(trace.pointer(0)).isEqualTo(trace.pointer(2)).isNotEqualTo(trace.pointer(1));
        assertThat(trace.pointer(1)).isEqualTo(trace.pointer(4));
        assertThat(trace.pointer(3)).as("a failure has no address").isZero();
        TraceReplayer.Result replay = TraceReplayer.replay(trace, ReplayStrategies.byName("best-fit"), 1L << 32);
        assertThat(replay.peakLiveBytes()).isEqualTo(4_000_000);
    }

    @Test
    void theStreamedCsvIsWhatTheTraceWrites() throws IOException {
        TraceRecorder recorder = new TraceRecorder(1000);
        recorder.start();
        for (int i = 0; i < 500; i++) {
            recorder.record(i % 2 == 0 ? Trace.ALLOCATE : Trace.FREE, ADDRESS + 64L * (i / 2), 64, i % 4);
        }
        StringWriter written = new StringWriter();
        recorder.snapshot().toTrace().write(written);
        assertThat(new String(recorder.snapshot().csv(true).readAllBytes(), StandardCharsets.UTF_8))
                .isEqualTo(written.toString());
    }
}
