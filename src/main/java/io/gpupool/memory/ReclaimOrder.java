package io.gpupool.memory;

/**
 * MAPPED growth: which free blocks a reclaim for the mapped budget unmaps first. All take the
 * largest blocks first (one unmap call frees the most); they differ within one block size, and in
 * whether the large chunks' blocks wait until the small chunks' are not enough.
 */
public enum ReclaimOrder {
    /**
     * The default. Within a block size, the highest address first (newest chunk, highest offset): what
     * address-ordered reuse reaches last.
     */
    HIGHEST_ADDRESS,
    /**
     * Within a block size, the block freed longest ago first, so the blocks a model's next layers are
     * about to ask for again (freed moments ago) stay mapped; on a tie the highest address. Measured
     * with {@link PoolConfig#waitBeyondBudget()} and a {@link PoolConfig#reclaimHysteresis()} of 0 in
     * docs/benchmarks.md ("Maps and unmaps").
     */
    COLDEST_IN_ORDER,
    /**
     * Free blocks of the small chunks first (largest first, then the highest address); those of the large
     * chunks, where runs of 64 MiB and more live, only when the small chunks' are not enough. The runs of
     * the largest requests stay mapped: they are the dearest to map again, and a map makes the request that
     * needs it (the longest ones) longer still (docs/benchmarks.md, Part 3 "Reclaim order").
     */
    SMALL_CHUNKS_FIRST
}
