package io.gpupool.memory.metric;

import java.util.concurrent.atomic.AtomicLongArray;

/**
 * A fixed log2 latency histogram that many threads record into without locks.
 *
 * <p>Each bucket is one slot of an {@link AtomicLongArray} updated with {@code getAndIncrement}.
 * Writers contend only when they land in the same bucket; pools record a sample of their
 * operations (see {@code DevicePool}), which keeps that rare. Readers see each bucket atomically
 * but not all buckets at one instant, which is fine for percentiles.
 */
public final class Log2Histogram implements LatencyDistribution {

    /** Buckets are spread 8 longs (one cache line) apart so that neighbours do not share lines. */
    private static final int STRIDE = 8;

    private final AtomicLongArray buckets = new AtomicLongArray(BUCKETS * STRIDE);

    /** Records one sample; negative values count as 0. */
    public void record(long nanos) {
        int index = nanos <= 1 ? 0 : 63 - Long.numberOfLeadingZeros(nanos);
        buckets.getAndIncrement(index * STRIDE);
    }

    @Override
    public long count() {
        long total = 0;
        for (int i = 0; i < BUCKETS; i++) {
            total += buckets.get(i * STRIDE);
        }
        return total;
    }

    @Override
    public long percentileNanos(double quantile) {
        if (!(quantile >= 0.0 && quantile <= 1.0)) {
            throw new IllegalArgumentException("quantile = " + quantile + " is invalid; allowed: [0, 1]");
        }
        long[] counts = bucketCounts();
        long total = 0;
        for (long c : counts) {
            total += c;
        }
        if (total == 0) {
            return 0;
        }
        long rank = Math.max(1, (long) Math.ceil(quantile * total));
        long seen = 0;
        for (int i = 0; i < BUCKETS; i++) {
            seen += counts[i];
            if (seen >= rank) {
                return LatencyDistribution.bucketUpperBoundNanos(i);
            }
        }
        return LatencyDistribution.bucketUpperBoundNanos(BUCKETS - 1);
    }

    @Override
    public long[] bucketCounts() {
        long[] copy = new long[BUCKETS];
        for (int i = 0; i < BUCKETS; i++) {
            copy[i] = buckets.get(i * STRIDE);
        }
        return copy;
    }
}
