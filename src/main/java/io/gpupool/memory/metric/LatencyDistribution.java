package io.gpupool.memory.metric;

/**
 * A read-only latency distribution in power-of-two buckets: bucket {@code i} counts values in
 * {@code [2^i, 2^(i+1))} nanoseconds (bucket 0 also holds 0). Percentiles are answered with the
 * upper bound of the bucket that contains them, so they are exact to a factor of two.
 */
public interface LatencyDistribution {

    /** Number of buckets (64: one per bit of a long). */
    int BUCKETS = 64;

    /** Number of recorded samples. */
    long count();

    /**
     * The smallest bucket upper bound below which at least {@code quantile} of the samples lie.
     *
     * @param quantile in [0, 1], e.g. 0.99
     * @return nanoseconds, or 0 when nothing was recorded
     */
    long percentileNanos(double quantile);

    /** A copy of the bucket counts, index = floor(log2(nanos)). */
    long[] bucketCounts();

    /** Exclusive upper bound of bucket {@code index} in nanoseconds. */
    static long bucketUpperBoundNanos(int index) {
        return index >= 62 ? Long.MAX_VALUE : 1L << (index + 1);
    }
}
