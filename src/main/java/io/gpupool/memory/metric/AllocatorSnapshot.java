package io.gpupool.memory.metric;


/** The common statistics of an allocator at one moment; see {@link AllocatorMetrics}. */
public record AllocatorSnapshot(String name, AllocatorMode mode, long reservedBytes, long allocatedBytes,
                                long requestedBytes, long peakReservedBytes, long peakAllocatedBytes,
                                AllocatorCounters counters, long latencySamples, long latencyP50Nanos,
                                long latencyP99Nanos) {
}
