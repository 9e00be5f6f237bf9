package io.gpupool.memory.trace;

import java.time.Instant;
import java.time.ZoneOffset;

/**
 * A bounded, switchable buffer of allocation events, shared by the tracing decorators.
 *
 * <p>While {@linkplain #start() recording}, each event is appended under this object's monitor (so
 * the order in the buffer is the order the calls were made). Once {@code capacity} events are held,
 * further events are counted in {@link #dropped()} and discarded: recording never grows memory
 * without bound. When not recording, {@link #isRecording()} is one volatile read and nothing else
 * happens.
 */
public final class TraceRecorder {

    private final int capacity;
    private volatile boolean recording;
    /** Guarded by this. */
    private Trace trace;
    /** Guarded by this. */
    private long dropped;
    /** Guarded by this: wall clock at start (nanos of day UTC) and the matching nanoTime. */
    private long startNanosOfDay;
    private long startNanoTime;

    public TraceRecorder(int capacity) {
        if (capacity <= 0) {
            throw new IllegalArgumentException("trace capacity must be positive, got " + capacity);
        }
        this.capacity = capacity;
        this.trace = new Trace(Math.min(capacity, 4096));
    }

    /** Starts (or continues) recording; events recorded before are kept. */
    public synchronized void start() {
        if (!recording) {
            startNanosOfDay = Instant.now().atOffset(ZoneOffset.UTC).toLocalTime().toNanoOfDay();
            startNanoTime = System.nanoTime();
            recording = true;
        }
    }

    public void stop() {
        recording = false;
    }

    public boolean isRecording() {
        return recording;
    }

    public int capacity() {
        return capacity;
    }

    /** Events that arrived while the buffer was full. */
    public synchronized long dropped() {
        return dropped;
    }

    public synchronized int recorded() {
        return trace.size();
    }

    /** Appends one event if recording (the thread is the calling thread). */
    public void record(byte action, long pointer, long bytes, int stream) {
        if (!recording) {
            return;
        }
        long now = System.nanoTime();
        long threadId = Thread.currentThread().threadId();
        synchronized (this) {
            if (trace.size() >= capacity) {
                dropped++;
                return;
            }
            trace.add(threadId, startNanosOfDay + (now - startNanoTime), action, pointer, bytes, stream);
        }
    }

    /** Returns the events recorded so far and starts an empty buffer (recording state unchanged). */
    public synchronized Trace drain() {
        Trace result = trace;
        trace = new Trace(Math.min(capacity, 4096));
        dropped = 0;
        return result;
    }
}
