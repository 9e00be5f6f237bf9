package io.gpupool.memory.metric;

/**
 * Read-only statistics of a device's memory admission (requests reserving their planned activation
 * peak under the pool's cap before they run). Getters take no lock: gauges read volatile fields
 * written under the admission's monitor, counters are {@code LongAdder}s.
 */
public interface AdmissionMetrics {

    /** Whether admission decides at all; when off every request runs at once and the pool alone answers. */
    boolean enabled();

    /** Requests waiting for memory now. */
    int waiting();

    /** Planned bytes of the requests waiting now. */
    long waitingBytes();

    /** Planned bytes of the requests admitted and not finished. */
    long admittedBytes();

    /** Requests admitted and not finished. */
    int running();

    /** Most planned bytes the admitted requests may hold together now: the cap minus the resident bytes. */
    long ceilingBytes();

    /**
     * The bound admission applies now: the ceiling, or less after admitted requests ran out of memory below it
     * (it falls to 3/4 of what was admitted then and climbs back by 1/32 of the ceiling per request that ends
     * without running out of memory).
     */
    long limitBytes();

    /** Bytes in the pool that belong to no request (kernel workspaces, graph pools), as last sampled. */
    long residentBytes();

    /** Requests admitted since start, at once or after waiting. */
    long admittedCount();

    /** Requests of those that had to wait. */
    long waitedCount();

    /** Requests refused at once because their planned peak alone exceeds the ceiling (answered 507). */
    long refusedCount();

    /** Requests that left the queue before they were admitted (timeout, disconnect, shutdown). */
    long abandonedCount();

    /**
     * Requests that ran out of memory beside other admitted ones and went back to the head of the queue to run
     * alone (the plans, or the pool's rounding and slabs, asked more than the charges said).
     */
    long aloneCount();

    /** Total nanoseconds admitted requests waited. */
    long waitNanos();

    /** How long admitted requests waited (0 for those admitted at once). */
    LatencyDistribution waitTime();
}
