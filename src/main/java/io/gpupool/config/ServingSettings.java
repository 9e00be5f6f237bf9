package io.gpupool.config;

import org.springframework.util.unit.DataSize;

import java.time.Duration;

/**
 * Validated {@code gpupool.serving.*}; the constructor rejects a bad value with a message naming the
 * property, the value and the allowed range.
 */
public record ServingSettings(int streamsPerDevice, int queueCapacity, Duration defaultTimeout, DataSize maxBodySize,
                              int maxBatchSize, int maxSequenceLength, boolean warmUp, boolean requestArena) {

    /** Bodies are read whole into one array. */
    static final long MAX_BODY_LIMIT = Integer.MAX_VALUE - 8;

    public ServingSettings {
        requireRange("streams-per-device", streamsPerDevice, 1, 256);
        requireRange("queue-capacity", queueCapacity, 0, 1_000_000);
        if (defaultTimeout == null || defaultTimeout.isNegative() || defaultTimeout.isZero()
                || defaultTimeout.compareTo(Duration.ofDays(1)) > 0) {
            throw invalid("default-timeout", defaultTimeout, "(0s, 1d]");
        }
        if (maxBodySize == null || maxBodySize.toBytes() < 1024 || maxBodySize.toBytes() > MAX_BODY_LIMIT) {
            throw invalid("max-body-size", maxBodySize, "[1KB, " + MAX_BODY_LIMIT + "B]");
        }
        requireRange("max-batch-size", maxBatchSize, 1, 1 << 20);
        requireRange("max-sequence-length", maxSequenceLength, 1, 1 << 20);
    }

    public int maxBodyBytes() {
        return (int) maxBodySize.toBytes();
    }

    private static void requireRange(String property, long value, long min, long max) {
        if (value < min || value > max) {
            throw invalid(property, value, "[" + min + ", " + max + "]");
        }
    }

    private static IllegalArgumentException invalid(String property, Object value, String allowed) {
        return new IllegalArgumentException("gpupool.serving." + property + " = " + value + " is invalid; allowed: "
                + allowed);
    }
}
