package io.gpupool.memory;

/** How the global level obtains chunks from its {@link ChunkSource}. */
public enum GrowthPolicy {
    /** Reserve {@link PoolConfig#initialBytes()} at construction and never grow the buddy level afterwards. */
    EAGER,
    /**
     * Start empty; grow on demand with chunks of growth step, doubling up to the largest step, within
     * the cap. Reserved bytes overshoot live bytes by up to the last step by construction
     * (docs/benchmarks.md, "Fragmentation").
     */
    LAZY,
    /** Reserve {@link PoolConfig#initialBytes()} at construction, then grow like {@link #LAZY}. */
    HYBRID,
    /**
     * Reserve {@link PoolConfig#initialBytes()} (may be 0) at construction, then grow by what a miss
     * needs: one chunk of the smallest power-of-two block that holds the request, after the local
     * caches were flushed, the global level coalesced and empty chunks too small for the request
     * returned. Reserved bytes track live bytes closely; each growth is one source call. What
     * {@link #MAPPED} falls back to on a source that cannot map.
     */
    ON_DEMAND,
    /**
     * The default. Needs a source that {@linkplain ChunkSource#virtualMemory() maps} (CUDA virtual
     * memory on a GPU, mmap on a Linux host; falls back to {@link #ON_DEMAND} otherwise). Buddy chunks
     * are reserved address space (four maximum blocks each,
     * costing no memory); device memory is mapped under a run when it is handed out, and free mapped
     * memory at the global level is unmapped when mapping more would pass the budget: the high-water
     * mark of allocated bytes plus {@link PoolConfig#mappedSlack()} of it (default 1/16). Reserved bytes (mapped
     * memory) then follow live bytes whatever the block layout; requests above the maximum block are
     * spans in address space, never dedicated chunks.
     */
    MAPPED
}
