package io.gpupool.lab;

import java.util.Arrays;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.LongAdder;

/**
 * Everything the driver measured, one slot per request, in preallocated primitive arrays (no boxing
 * while the load runs; the slot index is taken with one atomic increment).
 *
 * <pre>
 *   slot i:  start[i] (µs since the run began)  latency[i] (µs)  status[i]  kind[i]
 *   status:  HTTP status, or CANCELLED (the driver hung up on purpose), TRANSPORT (no answer: I/O error)
 * </pre>
 * Percentiles are exact: the latencies of the wanted slots are copied and sorted once at the end.
 */
final class Recorder {

    static final int CANCELLED = -1;
    static final int TRANSPORT = -2;

    private final long[] start;
    private final int[] latency;
    private final short[] status;
    private final byte[] kind;
    private final AtomicInteger next = new AtomicInteger();
    /** Malformed cases answered with a status other than 4xx: case name -> statuses seen. */
    private final Map<String, Map<Integer, LongAdder>> malformedSurprises = new ConcurrentHashMap<>();
    /** Successful-kind requests answered with a 5xx that is not 503/504/507: case name -> count. */
    private final Map<String, LongAdder> unexpectedByCase = new ConcurrentHashMap<>();
    private final LongAdder inFlight = new LongAdder();
    private final LongAdder okTokens = new LongAdder();

    Recorder(int capacity) {
        start = new long[capacity];
        latency = new int[capacity];
        status = new short[capacity];
        kind = new byte[capacity];
    }

    /** True while there is room for another request (the count bound of a run). */
    boolean hasRoom() {
        return next.get() < start.length;
    }

    void begin() {
        inFlight.increment();
    }

    long inFlight() {
        return inFlight.sum();
    }

    /** Records one finished request; false when the capacity is exhausted (the request is not counted). */
    boolean record(Workload.Request request, long startMicros, long latencyMicros, int httpStatus) {
        inFlight.decrement();
        int slot = next.getAndIncrement();
        if (slot >= start.length) {
            return false;
        }
        start[slot] = startMicros;
        latency[slot] = (int) Math.min(Integer.MAX_VALUE, latencyMicros);
        status[slot] = (short) httpStatus;
        kind[slot] = (byte) request.kind().ordinal();
        if (httpStatus == 200) {
            okTokens.add(request.tokens());
        }
        if (request.kind() == Workload.Kind.MALFORMED && (httpStatus < 400 || httpStatus >= 500) && httpStatus > 0) {
            malformedSurprises.computeIfAbsent(request.caseName(), k -> new ConcurrentHashMap<>())
                    .computeIfAbsent(httpStatus, k -> new LongAdder()).increment();
        }
        if (isUnexpected(httpStatus)) {
            unexpectedByCase.computeIfAbsent(request.caseName(), k -> new LongAdder()).increment();
        }
        return true;
    }

    /** 5xx other than the deliberate 503 (overloaded), 504 (timed out) and 507 (out of device memory). */
    static boolean isUnexpected(int httpStatus) {
        return httpStatus >= 500 && httpStatus != 503 && httpStatus != 504 && httpStatus != 507;
    }

    /** Tokens (batch x sequence) of the requests answered 200. */
    long okTokens() {
        return okTokens.sum();
    }

    int count() {
        return Math.min(next.get(), start.length);
    }

    long startMicros(int slot) {
        return start[slot];
    }

    int latencyMicros(int slot) {
        return latency[slot];
    }

    int status(int slot) {
        return status[slot];
    }

    Workload.Kind kind(int slot) {
        return Workload.Kind.values()[kind[slot]];
    }

    /** Requests by status (HTTP status, -1 cancelled, -2 transport error), in order. */
    Map<Integer, Long> byStatus() {
        Map<Integer, Long> counts = new TreeMap<>();
        for (int i = 0, n = count(); i < n; i++) {
            counts.merge((int) status[i], 1L, Long::sum);
        }
        return counts;
    }

    Map<String, Map<Integer, LongAdder>> malformedSurprises() {
        return malformedSurprises;
    }

    Map<String, LongAdder> unexpectedByCase() {
        return unexpectedByCase;
    }

    /** Sorted latencies (µs) of the slots of {@code wanted} kind (null: any) answered 200, started in [from, to). */
    int[] successLatencies(Workload.Kind wanted, long fromMicros, long toMicros) {
        int n = count();
        int[] values = new int[n];
        int size = 0;
        for (int i = 0; i < n; i++) {
            if (status[i] == 200 && (wanted == null || kind[i] == wanted.ordinal())
                    && start[i] >= fromMicros && start[i] < toMicros) {
                values[size++] = latency[i];
            }
        }
        int[] result = Arrays.copyOf(values, size);
        Arrays.sort(result);
        return result;
    }

    /** The q-quantile (0..1) of sorted values by the nearest-rank method; NaN when empty. */
    static double quantile(int[] sorted, double q) {
        if (sorted.length == 0) {
            return Double.NaN;
        }
        int rank = (int) Math.ceil(q * sorted.length);
        return sorted[Math.clamp(rank - 1, 0, sorted.length - 1)];
    }
}
