package io.gpupool.actuate;

import java.io.InputStream;

import io.gpupool.memory.trace.TracingAllocator;

/**
 * Trace recording of a {@link TracingAllocator} as the {@code gpupool} endpoint offers it: start clears
 * what was recorded before, stop keeps the events, and a download streams every event since the last
 * start, as often as asked. Reads take a snapshot of the recorder and never move events anywhere, so the
 * recorder's capacity is all the memory a recording ever holds. Start is synchronised so that two
 * operators starting at once both get an empty recording.
 */
public final class TracingAllocatorControl implements ManagedPool.TraceControl {

    private final TracingAllocator tracing;

    public TracingAllocatorControl(TracingAllocator tracing) {
        this.tracing = tracing;
    }

    @Override
    public boolean recording() {
        return tracing.isRecording();
    }

    @Override
    public long events() {
        return tracing.recorder().recorded();
    }

    @Override
    public synchronized void start() {
        tracing.recorder().clear();
        tracing.startRecording();
    }

    @Override
    public void stop() {
        tracing.stopRecording();
    }

    @Override
    public InputStream csv(boolean rawAddresses) {
        return tracing.recorder().snapshot().csv(rawAddresses);
    }
}
