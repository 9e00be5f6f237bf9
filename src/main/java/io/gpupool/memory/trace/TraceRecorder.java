package io.gpupool.memory.trace;

import java.io.IOException;
import java.io.InputStream;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.security.SecureRandom;
import java.time.Instant;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.List;

/**
 * A bounded, switchable buffer of allocation events, shared by the tracing decorators.
 *
 * <h2>Layout</h2>
 * <pre>
 *   segments:  [ Trace 0: SEGMENT events ][ Trace 1: SEGMENT events ] ... [ last: filling ]
 *              |&lt;------------------------- at most capacity events -------------------&gt;|
 * </pre>
 * Events are appended under this object's monitor (so the order in the buffer is the order the calls
 * were made) into fixed-size segments, allocated as they fill; a segment is never resized and a slot,
 * once written, is never written again. Once {@code capacity} events are held, further events are
 * counted in {@link #dropped()} and discarded: memory stays below {@code capacity} events whatever
 * reads the trace and however often. When not recording, {@link #isRecording()} is one volatile read
 * and nothing else happens.
 *
 * <h2>Reading</h2>
 * {@link #snapshot()} takes the monitor only to copy the segment list and the count: the events it
 * covers are immutable from then on, so a download renders them without the lock while recording goes
 * on, and reading does not consume ({@link #clear()} starts new segments rather than reusing old ones,
 * so a snapshot taken before stays valid). The CSV is rendered row by row as it is read
 * ({@link Snapshot#csv}), never built whole in memory.
 *
 * <h2>Addresses</h2>
 * Device addresses reveal the process's memory layout, so by default the CSV shows each address
 * through a keyed permutation of 64-bit values drawn at start-up: the same address always shows as the
 * same value and distinct addresses as distinct values (replay pairs allocations with frees by
 * pointer), but the real address cannot be read back. Raw addresses only when asked for.
 */
public final class TraceRecorder {

    /** Events per segment: 64 Ki events, about 2.4 MB of primitive columns. */
    static final int SEGMENT = 1 << 16;

    private final int capacity;
    private final long addressKey = new SecureRandom().nextLong();
    private volatile boolean recording;
    /** Guarded by this: the segments in order; each holds at most {@link #SEGMENT} events. */
    private List<Trace> segments = new ArrayList<>();
    /** Guarded by this. */
    private int recorded;
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
        return recorded;
    }

    /** Appends one event if recording (the thread is the calling thread). */
    public void record(byte action, long pointer, long bytes, int stream) {
        if (!recording) {
            return;
        }
        long now = System.nanoTime();
        long threadId = Thread.currentThread().threadId();
        synchronized (this) {
            if (recorded >= capacity) {
                dropped++;
                return;
            }
            Trace last = segments.isEmpty() ? null : segments.getLast();
            if (last == null || last.size() == SEGMENT) {
                last = new Trace(Math.min(SEGMENT, capacity - recorded));
                segments.add(last);
            }
            last.add(threadId, startNanosOfDay + (now - startNanoTime), action, pointer, bytes, stream);
            recorded++;
        }
    }

    /** Forgets every event (recording state unchanged); snapshots taken before keep theirs. */
    public synchronized void clear() {
        segments = new ArrayList<>();
        recorded = 0;
        dropped = 0;
    }

    /** The events recorded so far, as they are now; later events are not in it. */
    public synchronized Snapshot snapshot() {
        List<Trace> copy = List.copyOf(segments);
        int lastSize = copy.isEmpty() ? 0 : copy.getLast().size();
        return new Snapshot(copy, lastSize, addressKey);
    }

    /** Returns the events recorded so far as one trace and forgets them (recording state unchanged). */
    public Trace drain() {
        Snapshot snapshot;
        synchronized (this) {
            snapshot = snapshot();
            clear();
        }
        return snapshot.toTrace();
    }

    /** An immutable prefix of the recording. */
    public static final class Snapshot {

        private final List<Trace> segments;
        private final int lastSize;
        private final long addressKey;

        private Snapshot(List<Trace> segments, int lastSize, long addressKey) {
            this.segments = segments;
            this.lastSize = lastSize;
            this.addressKey = addressKey;
        }

        public int size() {
            return segments.isEmpty() ? 0 : (segments.size() - 1) * SEGMENT + lastSize;
        }

        private int segmentSize(int segment) {
            return segment == segments.size() - 1 ? lastSize : SEGMENT;
        }

        /** A copy as one trace (for replay in tests and tools; a download streams instead). */
        public Trace toTrace() {
            Trace trace = new Trace(Math.max(16, size()));
            for (int s = 0; s < segments.size(); s++) {
                Trace segment = segments.get(s);
                for (int i = 0; i < segmentSize(s); i++) {
                    trace.add(segment.thread(i), segment.timeNanos(i), segment.action(i), segment.pointer(i),
                            segment.bytes(i), segment.stream(i));
                }
            }
            return trace;
        }

        /**
         * The CSV ({@link Trace#HEADER} and one row per event), rendered as it is read.
         *
         * @param rawAddresses true for the device addresses themselves, false for their stand-ins
         */
        public InputStream csv(boolean rawAddresses) {
            return new CsvStream(rawAddresses);
        }

        /** Writes the same CSV as {@link #csv} to {@code out}. */
        public void writeCsv(Writer out, boolean rawAddresses) throws IOException {
            try (InputStream in = csv(rawAddresses)) {
                out.write(new String(in.readAllBytes(), StandardCharsets.UTF_8));
            }
        }

        /**
         * A keyed bijection on 64-bit values (add a secret, then the invertible mixing steps of a
         * SplitMix64 finaliser): equal in, equal out; distinct in, distinct out; 0 (no address) stays 0.
         */
        private long hide(long address) {
            if (address == 0) {
                return 0;
            }
            long z = address + addressKey;
            z = (z ^ (z >>> 30)) * 0xbf58476d1ce4e5b9L;
            z = (z ^ (z >>> 27)) * 0x94d049bb133111ebL;
            return z ^ (z >>> 31);
        }

        /** Renders a few hundred rows at a time into a reused buffer. */
        private final class CsvStream extends InputStream {

            private static final int ROWS_PER_FILL = 512;

            private final boolean rawAddresses;
            private final StringBuilder text = new StringBuilder(ROWS_PER_FILL * 64);
            private byte[] buffer = (Trace.HEADER + "\n").getBytes(StandardCharsets.US_ASCII);
            private int position;
            private int segment;
            private int row;

            CsvStream(boolean rawAddresses) {
                this.rawAddresses = rawAddresses;
            }

            @Override
            public int read() {
                if (!fill()) {
                    return -1;
                }
                return buffer[position++] & 0xFF;
            }

            @Override
            public int read(byte[] into, int offset, int length) {
                if (length == 0) {
                    return 0;
                }
                if (!fill()) {
                    return -1;
                }
                int n = Math.min(length, buffer.length - position);
                System.arraycopy(buffer, position, into, offset, n);
                position += n;
                return n;
            }

            /** True when bytes are available, rendering the next rows if the buffer is used up. */
            private boolean fill() {
                if (position < buffer.length) {
                    return true;
                }
                text.setLength(0);
                int rows = 0;
                while (rows < ROWS_PER_FILL && segment < segments.size()) {
                    Trace trace = segments.get(segment);
                    if (row >= segmentSize(segment)) {
                        segment++;
                        row = 0;
                        continue;
                    }
                    long pointer = trace.pointer(row);
                    Trace.appendRow(text, trace.thread(row), trace.timeNanos(row), trace.action(row),
                            rawAddresses ? pointer : hide(pointer), trace.bytes(row), trace.stream(row));
                    row++;
                    rows++;
                }
                if (rows == 0) {
                    return false;
                }
                buffer = text.toString().getBytes(StandardCharsets.US_ASCII);
                position = 0;
                return true;
            }
        }
    }
}
