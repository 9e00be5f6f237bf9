package io.gpupool.memory.metric;

/** Allocation strategies selectable by configuration ({@code gpupool.memory.mode}). */
public enum AllocatorMode {
    /** Stream-local caches in front of the global buddy pool (the default). */
    TWO_LEVEL,
    /** The global buddy pool alone, every request takes its lock. */
    GLOBAL_ONLY,
    /** Best-fit free list with coalescing (the second seed's design), for comparison. */
    BEST_FIT,
    /** A device allocation and free per request (cuMemAlloc/cuMemFree; malloc/free on the host). */
    DIRECT,
    /** The driver's stream-ordered allocator (cuMemAllocAsync/cuMemFreeAsync), CUDA only. */
    CUDA_ASYNC
}
