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

    /**
     * Captures that failed (begin, a recorded operation, end or instantiation refused; or the warm-up run before
     * it), since start: the request was answered eagerly and its shape waits out a retry spacing.
     */
    long captureFailures();

    /**
     * Replays that failed (the graph did not fit its forward, or its launch was refused), since start: the graph
     * was dropped and the request answered eagerly. Unlike a capture failure, this is a graph that worked before.
     */
    long replayFailures();

    /** Captures and replays that failed, both answered eagerly, since start. */
    default long failures() {
        return captureFailures() + replayFailures();
    }

    /** Graphs dropped to make room, on tuning, or on model unload, since start. */
    long evictions();
}
