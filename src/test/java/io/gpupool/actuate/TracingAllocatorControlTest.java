package io.gpupool.actuate;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.StringWriter;

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
            StringWriter first = new StringWriter();
            control.writeCsv(first);
            StringWriter second = new StringWriter();
            control.writeCsv(second);
            String pointer = "0x" + Long.toHexString(block.address());
            assertThat(first.toString()).startsWith("Thread,Time,Action,Pointer,Size,Stream")
                    .contains(",allocate," + pointer + ",1048576,3").contains(",free," + pointer + ",1048576,3")
                    .doesNotContain(",4096,").doesNotContain(",8192,");
            assertThat(second.toString()).isEqualTo(first.toString());

            control.start(); // a new recording starts empty
            assertThat(control.events()).isZero();
            control.stop();
        }
    }
}
