package io.gpupool.memory;

/**
 * MAPPED growth: which free blocks a reclaim for the mapped budget unmaps first. Both take the
 * largest blocks first (one unmap call frees the most); they differ within one block size.
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
    COLDEST_IN_ORDER
}
