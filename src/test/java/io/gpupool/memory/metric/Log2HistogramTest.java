package io.gpupool.memory.metric;

import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class Log2HistogramTest {

    @Test
    void percentilesAreTheUpperBoundOfTheBucketHoldingThem() {
        Log2Histogram histogram = new Log2Histogram();
        assertThat(histogram.percentileNanos(0.99)).isZero();
        for (int i = 0; i < 90; i++) {
            histogram.record(100);          // bucket [64, 128)
        }
        for (int i = 0; i < 10; i++) {
            histogram.record(5_000);        // bucket [4096, 8192)
        }
        assertThat(histogram.count()).isEqualTo(100);
        assertThat(histogram.percentileNanos(0.5)).isEqualTo(128);
        assertThat(histogram.percentileNanos(0.9)).isEqualTo(128);
        assertThat(histogram.percentileNanos(0.91)).isEqualTo(8192);
        assertThat(histogram.bucketCounts()[6]).isEqualTo(90);
        assertThat(histogram.bucketCounts()[12]).isEqualTo(10);
        assertThatThrownBy(() -> histogram.percentileNanos(1.5)).hasMessageContaining("quantile = 1.5");
    }
}
