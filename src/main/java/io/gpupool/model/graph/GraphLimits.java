package io.gpupool.model.graph;

/**
 * The runtime-tunable limits of a device's graph cache.
 *
 * @param enabled   whether requests use graphs (off: every request runs eagerly, cached graphs are freed)
 * @param maxCount most graphs cached, 0 to 4096
 * @param maxBytes  most pool bytes the graphs' activation blocks hold, at least 0
 */
public record GraphLimits(boolean enabled, int maxCount, long maxBytes) {

    public static final int MAX_COUNT_LIMIT = 4096;

    public GraphLimits {
        if (maxCount < 0 || maxCount > MAX_COUNT_LIMIT) {
            throw new IllegalArgumentException("maxCount = " + maxCount + " is out of range; allowed: 0 to "
                    + MAX_COUNT_LIMIT);
        }
        if (maxBytes < 0) {
            throw new IllegalArgumentException("maxBytes = " + maxBytes + " is out of range; allowed: >= 0");
        }
    }
}
