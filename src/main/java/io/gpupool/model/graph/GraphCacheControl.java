package io.gpupool.model.graph;

/** What operators see and change of one device's graphs (the actuator and the meters use it). */
public interface GraphCacheControl {

    GraphCacheMetrics metrics();

    /** The limits in force. */
    GraphLimits limits();

    /** Applies new limits at once: what no longer fits is freed (graphs in use when their replay ends). */
    void tune(GraphLimits limits);
}
