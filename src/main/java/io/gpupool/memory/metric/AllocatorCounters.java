package io.gpupool.memory.metric;

/**
 * Monotonic event counts of an allocator, read at one moment (each value is exact, the set is not
 * an atomic snapshot). Allocators that have no local or global level report 0 for those.
 *
 * @param allocations successful allocations
 * @param frees       blocks returned (reference count reached zero)
 * @param localHits   allocations served from the stream's local cache
 * @param globalHits  allocations served by the global level without growing
 * @param grows       chunks obtained from the source
 * @param trims       chunks returned to the source, plus local cache flushes by trim/recovery
 * @param coalesces   buddy merges performed
 * @param recoveries  staged out-of-memory recoveries started
 * @param failures    allocations that failed with {@code OutOfDeviceMemoryException}
 */
public record AllocatorCounters(long allocations, long frees, long localHits, long globalHits, long grows,
                                long trims, long coalesces, long recoveries, long failures) {
}
