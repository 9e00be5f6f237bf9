package io.gpupool.actuate;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpupool.memory.AllocationStream;
import io.gpupool.memory.DeviceBlock;
import io.gpupool.memory.StreamFence;
import io.gpupool.memory.bestfit.BestFitAllocator;
import io.gpupool.replay.SimulatedChunkSource;
import io.gpupool.memory.trace.TracingAllocator;
import org.junit.jupiter.api.Test;

class TracingAllocatorControlTest {

    static final StreamFence DONE = new StreamFence() {
        @Override
        public boolean isComplete() {
            return true;
        }

        @Override
        public void makeWait(AllocationStream stream) {
        }

        @Override
        public void await() {
        }

        @Override
        public void close() {
        }
    };

    static final AllocationStream STREAM_3 = new AllocationStream() {
        @Override
        public int ordinal() {
            return 3;
        }

        @Override
        public StreamFence recordFence() {
            return DONE; // host-side test: no device work is ever queued
        }
    };

    static String csv(TracingAllocatorControl control, boolean rawAddresses) throws java.io.IOException {
        try (java.io.InputStream in = control.csv(rawAddresses)) {
            return new String(in.readAllBytes(), java.nio.charset.StandardCharsets.UTF_8);
        }
    }

    @Test
    void readingTheTraceWhileRecordingNeverHoldsMoreThanTheRecordersCapacity() throws Exception {
        try (TracingAllocator tracing = new TracingAllocator(
                new BestFitAllocator(new SimulatedChunkSource("sim", 1L << 30)), 10)) {
            TracingAllocatorControl control = new TracingAllocatorControl(tracing);
            control.start();
            for (int round = 0; round < 5; round++) {
                for (int i = 0; i < 5; i++) {
                    tracing.allocate(4096, STREAM_3).release();
                }
                control.events(); // what every GET /actuator/gpupool does
                csv(control, false);
            }
            assertThat(control.events()).isEqualTo(10);
            assertThat(csv(control, false).lines().count()).isEqualTo(11);
        }
    }

    @Test
    void recordsBetweenStartAndStopAndDownloadsTheSameCsvTwice() throws Exception {
        try (TracingAllocator tracing = new TracingAllocator(
                new BestFitAllocator(new SimulatedChunkSource("sim", 1L << 30)), 1024)) {
            TracingAllocatorControl control = new TracingAllocatorControl(tracing);
            tracing.allocate(4096, STREAM_3).release(); // before start: not in the trace

            control.start();
            assertThat(control.recording()).isTrue();
            DeviceBlock block = tracing.allocate(1 << 20, STREAM_3);
            block.release();
            control.stop();
            tracing.allocate(8192, STREAM_3).release(); // after stop: not in the trace

            assertThat(control.recording()).isFalse();
            assertThat(control.events()).isEqualTo(2);
            String first = csv(control, true);
            String second = csv(control, true);
            String pointer = "0x" + Long.toHexString(block.address());
            assertThat(first).startsWith("Thread,Time,Action,Pointer,Size,Stream")
                    .contains(",allocate," + pointer + ",1048576,3").contains(",free," + pointer + ",1048576,3")
                    .doesNotContain(",4096,").doesNotContain(",8192,");
            assertThat(second).isEqualTo(first);
            String hidden = csv(control, false);
            assertThat(hidden).as("no raw addresses unless asked").doesNotContain(pointer)
                    .contains(",allocate,0x").contains(",1048576,3");

            control.start(); // a new recording starts empty
            assertThat(control.events()).isZero();
            control.stop();
        }
    }
}
