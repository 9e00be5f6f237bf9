package io.gpupool.model.graph;

/**
 * Read-only numbers of one device's graph cache, readable at any time without taking its lock
 * (volatile fields written under the lock, {@link java.util.concurrent.atomic.LongAdder} counters).
 */
public interface GraphCacheMetrics {

    /** Whether requests use graphs now. */
    boolean enabled();

    /** Graphs cached now. */
    int graphs();

    /** Pool bytes the cached graphs hold (one block each), plus the block of a capture in progress. */
    long bytes();

    /** Most graphs the cache keeps. */
    int maxCount();

    /** Most pool bytes the cache holds. */
    long maxBytes();

    /** Requests served by replaying a graph, since start. */
    long hits();

    /** Requests in a bucketed shape that ran eagerly (no graph yet, or it was busy), since start. */
    long misses();

    /** Graphs captured and cached, since start. */
    long captures();

    /** Captures that failed, and replays that found their graph did not fit (both fell back to eager), since start. */
    long failures();

    /** Graphs dropped to make room, on tuning, or on model unload, since start. */
    long evictions();
}
