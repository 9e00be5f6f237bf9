package io.gpupool.actuate;

import java.io.IOException;
import java.io.Writer;

import io.gpupool.memory.trace.Trace;
import io.gpupool.memory.trace.TracingAllocator;

/**
 * Trace recording of a {@link TracingAllocator} as the {@code gpupool} endpoint offers it: start clears
 * what was recorded before, stop keeps the events, and a download returns every event since the last
 * start, as often as asked (the recorder's buffer is drained into a trace held here, so reading does
 * not consume). Synchronised: operator calls are rare and never on the allocation path.
 */
public final class TracingAllocatorControl implements ManagedPool.TraceControl {

    private final TracingAllocator tracing;
    private Trace held = new Trace();

    public TracingAllocatorControl(TracingAllocator tracing) {
        this.tracing = tracing;
    }

    @Override
    public boolean recording() {
        return tracing.isRecording();
    }

    @Override
    public synchronized long events() {
        collect();
        return held.size();
    }

    @Override
    public synchronized void start() {
        tracing.drain();
        held = new Trace();
        tracing.startRecording();
    }

    @Override
    public synchronized void stop() {
        tracing.stopRecording();
        collect();
    }

    @Override
    public synchronized void writeCsv(Writer out) throws IOException {
        collect();
        held.write(out);
    }

    /** Moves what the recorder holds into {@link #held}. */
    private void collect() {
        Trace fresh = tracing.drain();
        for (int i = 0; i < fresh.size(); i++) {
            held.add(fresh.thread(i), fresh.timeNanos(i), fresh.action(i), fresh.pointer(i), fresh.bytes(i),
                    fresh.stream(i));
        }
    }
}
