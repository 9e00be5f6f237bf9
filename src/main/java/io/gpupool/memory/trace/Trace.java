package io.gpupool.memory.trace;

import java.io.BufferedReader;
import java.io.BufferedWriter;
import java.io.IOException;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.LocalTime;
import java.time.format.DateTimeParseException;
import java.util.Arrays;

/**
 * An allocation trace: allocate and free events in the order they happened, stored column-wise in
 * primitive arrays (no object per event), with reading and writing in RMM's logging CSV format.
 *
 * <h2>CSV format</h2>
 * <pre>
 *   Thread,Time,Action,Pointer,Size,Stream
 *   140,16:02:11.048213,allocate,0x10000000000,3145728,0
 *   140,16:02:11.048230,free,0x10000000000,3145728,0
 *   141,16:02:11.049002,allocate failure,0x0,1073741824,3
 * </pre>
 * <ul>
 *   <li>Thread: the id of the thread that made the call.</li>
 *   <li>Time: wall-clock time of day (UTC) with microseconds, {@code HH:MM:SS.ffffff}; a plain
 *       integer (nanoseconds) is accepted on input too.</li>
 *   <li>Action: {@code allocate}, {@code free}, or {@code allocate failure} (a refused request;
 *       replay skips it).</li>
 *   <li>Pointer: hexadecimal with {@code 0x}; decimal accepted on input.</li>
 *   <li>Size: bytes requested (for a free: the size of the allocation being freed).</li>
 *   <li>Stream: the stream's ordinal, {@code none} for events that belong to no stream (chunk
 *       traces); hexadecimal accepted on input (RMM writes stream handles).</li>
 * </ul>
 */
public final class Trace {

    /** The CSV header line, as RMM writes it. */
    public static final String HEADER = "Thread,Time,Action,Pointer,Size,Stream";

    public static final byte ALLOCATE = 0;
    public static final byte FREE = 1;
    public static final byte ALLOCATE_FAILURE = 2;
    /** Stream value of events that belong to no stream. */
    public static final int NO_STREAM = -1;

    private long[] thread;
    private long[] time;
    private byte[] action;
    private long[] pointer;
    private long[] size;
    private int[] stream;
    private int count;

    public Trace() {
        this(1024);
    }

    public Trace(int initialCapacity) {
        int capacity = Math.max(16, initialCapacity);
        thread = new long[capacity];
        time = new long[capacity];
        action = new byte[capacity];
        pointer = new long[capacity];
        size = new long[capacity];
        stream = new int[capacity];
    }

    /** Appends an event; {@code timeNanos} is nanoseconds since midnight UTC. */
    public void add(long threadId, long timeNanos, byte act, long ptr, long bytes, int streamOrdinal) {
        if (act < ALLOCATE || act > ALLOCATE_FAILURE) {
            throw new IllegalArgumentException("unknown action code " + act);
        }
        if (count == thread.length) {
            grow();
        }
        thread[count] = threadId;
        time[count] = timeNanos;
        action[count] = act;
        pointer[count] = ptr;
        size[count] = bytes;
        stream[count] = streamOrdinal;
        count++;
    }

    private void grow() {
        int capacity = Math.multiplyExact(thread.length, 2);
        thread = Arrays.copyOf(thread, capacity);
        time = Arrays.copyOf(time, capacity);
        action = Arrays.copyOf(action, capacity);
        pointer = Arrays.copyOf(pointer, capacity);
        size = Arrays.copyOf(size, capacity);
        stream = Arrays.copyOf(stream, capacity);
    }

    public int size() {
        return count;
    }

    public long thread(int i) {
        return thread[check(i)];
    }

    /** Nanoseconds since midnight UTC. */
    public long timeNanos(int i) {
        return time[check(i)];
    }

    public byte action(int i) {
        return action[check(i)];
    }

    public long pointer(int i) {
        return pointer[check(i)];
    }

    public long bytes(int i) {
        return size[check(i)];
    }

    public int stream(int i) {
        return stream[check(i)];
    }

    private int check(int i) {
        if (i < 0 || i >= count) {
            throw new IndexOutOfBoundsException("event " + i + " of " + count);
        }
        return i;
    }

    // ---------------------------------------------------------------- CSV

    public void write(Path file) throws IOException {
        try (BufferedWriter out = Files.newBufferedWriter(file, StandardCharsets.UTF_8)) {
            write(out);
        }
    }

    public void write(Writer out) throws IOException {
        StringBuilder line = new StringBuilder(96);
        out.write(HEADER);
        out.write('\n');
        for (int i = 0; i < count; i++) {
            line.setLength(0);
            appendRow(line, thread[i], time[i], action[i], pointer[i], size[i], stream[i]);
            out.append(line);
        }
    }

    /** Appends one CSV row, newline included. */
    static void appendRow(StringBuilder line, long threadId, long timeNanos, byte act, long ptr, long bytes,
                          int streamOrdinal) {
        line.append(threadId).append(',');
        appendTime(line, timeNanos);
        line.append(',').append(actionName(act))
                .append(",0x").append(Long.toHexString(ptr))
                .append(',').append(bytes).append(',');
        if (streamOrdinal == NO_STREAM) {
            line.append("none");
        } else {
            line.append(streamOrdinal);
        }
        line.append('\n');
    }

    private static void appendTime(StringBuilder line, long nanosOfDay) {
        long micros = Math.floorMod(nanosOfDay, 86_400_000_000_000L) / 1_000;
        long seconds = micros / 1_000_000;
        pad(line, seconds / 3600, 2).append(':');
        pad(line, seconds / 60 % 60, 2).append(':');
        pad(line, seconds % 60, 2).append('.');
        pad(line, micros % 1_000_000, 6);
    }

    private static StringBuilder pad(StringBuilder line, long value, int width) {
        String digits = Long.toString(value);
        for (int i = digits.length(); i < width; i++) {
            line.append('0');
        }
        return line.append(digits);
    }

    public static String actionName(byte act) {
        return switch (act) {
            case ALLOCATE -> "allocate";
            case FREE -> "free";
            case ALLOCATE_FAILURE -> "allocate failure";
            default -> throw new IllegalArgumentException("unknown action code " + act);
        };
    }

    /** Reads a trace file; errors name the file, the line number and the field. */
    public static Trace read(Path file) throws IOException {
        try (BufferedReader in = Files.newBufferedReader(file, StandardCharsets.UTF_8)) {
            return read(in, file.toString());
        }
    }

    public static Trace read(BufferedReader in, String sourceName) throws IOException {
        String header = in.readLine();
        if (header == null || !header.strip().equals(HEADER)) {
            throw new IllegalArgumentException(sourceName + ": first line must be the header '" + HEADER
                    + "', got '" + header + "'");
        }
        Trace trace = new Trace(4096);
        String line;
        int lineNumber = 1;
        while ((line = in.readLine()) != null) {
            lineNumber++;
            if (line.isBlank()) {
                continue;
            }
            String[] f = line.split(",", -1);
            if (f.length != 6) {
                throw new IllegalArgumentException(sourceName + ":" + lineNumber + ": expected 6 fields ("
                        + HEADER + "), got " + f.length + ": '" + line + "'");
            }
            String where = sourceName + ":" + lineNumber;
            trace.add(parseLong(f[0], where, "Thread"), parseTime(f[1], where), parseAction(f[2], where),
                    parseNumber(f[3], where, "Pointer"), parseLong(f[4], where, "Size"), parseStream(f[5], where));
        }
        return trace;
    }

    private static byte parseAction(String field, String where) {
        return switch (field.strip()) {
            case "allocate" -> ALLOCATE;
            case "free" -> FREE;
            case "allocate failure" -> ALLOCATE_FAILURE;
            default -> throw new IllegalArgumentException(where + ": Action must be allocate, free or "
                    + "'allocate failure', got '" + field + "'");
        };
    }

    private static long parseTime(String field, String where) {
        String s = field.strip();
        if (s.indexOf(':') < 0) {
            return parseLong(s, where, "Time");
        }
        try {
            return LocalTime.parse(s).toNanoOfDay();
        } catch (DateTimeParseException e) {
            throw new IllegalArgumentException(where + ": Time must be HH:MM:SS.ffffff or nanoseconds, got '"
                    + field + "'");
        }
    }

    private static int parseStream(String field, String where) {
        String s = field.strip();
        if (s.equals("none") || s.isEmpty()) {
            return NO_STREAM;
        }
        long value = parseNumber(s, where, "Stream");
        if (value < 0 || value > Integer.MAX_VALUE) {
            throw new IllegalArgumentException(where + ": Stream must be in [0, " + Integer.MAX_VALUE
                    + "] or 'none', got '" + field + "'");
        }
        return (int) value;
    }

    private static long parseNumber(String field, String where, String column) {
        String s = field.strip();
        try {
            if (s.startsWith("0x") || s.startsWith("0X")) {
                return Long.parseUnsignedLong(s.substring(2), 16);
            }
            return Long.parseLong(s);
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException(where + ": " + column + " must be a number (decimal or 0x hex), got '"
                    + field + "'");
        }
    }

    private static long parseLong(String field, String where, String column) {
        try {
            return Long.parseLong(field.strip());
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException(where + ": " + column + " must be a decimal integer, got '"
                    + field + "'");
        }
    }
}
