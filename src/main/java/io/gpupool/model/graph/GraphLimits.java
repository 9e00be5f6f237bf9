package io.gpupool.model.graph;

/**
 * The runtime-tunable limits of a device's graph cache.
 *
 * @param enabled   whether requests use graphs (off: every request runs eagerly, cached graphs are freed)
 * @param maxGraphs most graphs cached, 0 to 4096
 * @param maxBytes  most pool bytes the graphs' activation blocks hold, at least 0
 */
public record GraphLimits(boolean enabled, int maxGraphs, long maxBytes) {

    public static final int MAX_GRAPHS_LIMIT = 4096;

    public GraphLimits {
        if (maxGraphs < 0 || maxGraphs > MAX_GRAPHS_LIMIT) {
            throw new IllegalArgumentException("maxGraphs = " + maxGraphs + " is out of range; allowed: 0 to "
                    + MAX_GRAPHS_LIMIT);
        }
        if (maxBytes < 0) {
            throw new IllegalArgumentException("maxBytes = " + maxBytes + " is out of range; allowed: >= 0");
        }
    }
}
