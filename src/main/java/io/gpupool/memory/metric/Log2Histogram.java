package io.gpupool.memory.metric;

import java.util.concurrent.atomic.LongAdder;

/**
 * A fixed log2 latency histogram that many threads record into without locks.
 *
 * <p>Each bucket is a {@link LongAdder}: most samples of one operation land in the same one or two
 * buckets, and a striped adder keeps sixteen recording threads from fighting over one cache line.
 * Readers see each bucket's sum, not all buckets at one instant, which is fine for percentiles.
 */
public final class Log2Histogram implements LatencyDistribution {

    private final LongAdder[] buckets = new LongAdder[BUCKETS];

    public Log2Histogram() {
        for (int i = 0; i < BUCKETS; i++) {
            buckets[i] = new LongAdder();
        }
    }

    /** Records one sample; negative values count as 0. */
    public void record(long nanos) {
        int index = nanos <= 1 ? 0 : 63 - Long.numberOfLeadingZeros(nanos);
        buckets[index].increment();
    }

    @Override
    public long count() {
        long total = 0;
        for (int i = 0; i < BUCKETS; i++) {
            total += buckets[i].sum();
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
            copy[i] = buckets[i].sum();
        }
        return copy;
    }
}
