package io.gpupool.actuate;

import io.gpupool.model.graph.GraphCacheControl;
import io.gpupool.model.graph.GraphCacheMetrics;
import io.gpupool.model.graph.GraphLimits;

/** A device's graph cache with fixed numbers and limits the tests read back. */
final class FakeGraphCache implements GraphCacheControl, GraphCacheMetrics {

    volatile GraphLimits limits;

    FakeGraphCache() {
        reset();
    }

    void reset() {
        limits = new GraphLimits(true, 64, 1L << 30);
    }

    @Override
    public GraphCacheMetrics metrics() {
        return this;
    }

    @Override
    public GraphLimits limits() {
        return limits;
    }

    @Override
    public void tune(GraphLimits limits) {
        this.limits = limits;
    }

    @Override
    public boolean enabled() {
        return limits.enabled();
    }

    @Override
    public int graphs() {
        return 3;
    }

    @Override
    public long bytes() {
        return 48L << 20;
    }

    @Override
    public int maxCount() {
        return limits.maxCount();
    }

    @Override
    public long maxBytes() {
        return limits.maxBytes();
    }

    @Override
    public long hits() {
        return 1000;
    }

    @Override
    public long misses() {
        return 7;
    }

    @Override
    public long captures() {
        return 4;
    }

    @Override
    public long captureFailures() {
        return 1;
    }

    @Override
    public long replayFailures() {
        return 2;
    }

    @Override
    public long evictions() {
        return 1;
    }
}
