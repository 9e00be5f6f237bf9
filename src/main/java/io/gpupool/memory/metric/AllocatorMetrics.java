package io.gpupool.memory.metric;


/**
 * Read-only statistics every {@code DeviceAllocator} exposes. Getters never take an allocation
 * lock: implementations keep {@code LongAdder}s or single-writer counters and say which.
 */
public interface AllocatorMetrics {

    /** The allocator's source, e.g. {@code cuda:0} or {@code host}. */
    String name();

    AllocatorMode mode();

    /** Bytes currently obtained from the device (chunks, dedicated chunks, direct allocations). */
    long reservedBytes();

    /** Bytes currently handed out to callers, as rounded by the allocator. */
    long allocatedBytes();

    /** Bytes currently handed out to callers, as requested. */
    long requestedBytes();

    /** Highest {@link #reservedBytes()} since creation or the last {@link #resetPeaks()}. */
    long peakReservedBytes();

    /** Highest {@link #allocatedBytes()} since creation or the last {@link #resetPeaks()}. */
    long peakAllocatedBytes();

    /**
     * Highest {@link #requestedBytes()} since creation or the last {@link #resetPeaks()}: what the
     * callers asked for at their busiest. Peak allocated over this is the allocator's rounding (and,
     * where peaks are sampled, timing); peak reserved over this is all it costs.
     */
    long peakRequestedBytes();

    /** Starts a new peak period at the current values (the one write operation here, for operators). */
    void resetPeaks();

    AllocatorCounters counters();

    /** Time spent in {@code allocate}, possibly sampled (the implementation says how). */
    LatencyDistribution allocationLatency();

    /** The values above gathered into one record, e.g. for an actuator response. */
    default AllocatorSnapshot snapshot() {
        return new AllocatorSnapshot(name(), mode(), reservedBytes(), allocatedBytes(), requestedBytes(),
                peakReservedBytes(), peakAllocatedBytes(), counters(), allocationLatency().count(),
                allocationLatency().percentileNanos(0.5), allocationLatency().percentileNanos(0.99));
    }
}
