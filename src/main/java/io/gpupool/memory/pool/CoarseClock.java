package io.gpupool.memory.pool;

/**
 * A clock of millisecond grain for the local caches' idle stamps, so that the hot path makes no
 * clock call.
 *
 * <p>Every stream reads {@link #nanos} on every local operation; writing it on every global operation
 * of sixteen streams would keep invalidating that line. {@link #advance} therefore writes only when
 * the clock fell more than {@value #GRANULARITY_NANOS} ns behind. Written by maintenance (every second
 * in the server), every 1024th local operation of any stream and every allocation whose latency is
 * timed (one in {@value PoolStatistics#LATENCY_SAMPLE_EVERY} on average: it reads the time anyway), so
 * no allocation reads the time for this clock alone. In the server it is at most a maintenance period
 * behind, far below the idle ages it serves (seconds).
 */
final class CoarseClock {

    /** The clock is written only when it moved by more than this. */
    static final long GRANULARITY_NANOS = 1_000_000;

    private volatile long nanos = System.nanoTime();

    long nanos() {
        return nanos;
    }

    /** Moves the clock to {@code now} if it is more than {@value #GRANULARITY_NANOS} ns behind. */
    void advance(long now) {
        if (now - nanos > GRANULARITY_NANOS) {
            nanos = now;
        }
    }

    /** Sets the clock (maintenance, which runs rarely). */
    void set(long now) {
        nanos = now;
    }
}
