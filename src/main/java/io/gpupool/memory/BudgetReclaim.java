package io.gpupool.memory;

/**
 * Where {@link GrowthPolicy#MAPPED} growth gives back free mapped memory above its budget (the allocated
 * high-water mark plus {@link PoolConfig#mappedSlack()}).
 *
 * <p>Giving memory back costs driver calls: an unmap now, and a map again as soon as the load needs the
 * memory once more. Under a steady load the same units go back and forth, and each call waits on the
 * driver's lock behind the kernel launches of every serving thread. The two places trade memory held
 * for those calls (docs/benchmarks.md, "Where the budget reclaim runs").
 */
public enum BudgetReclaim {
    /**
     * The allocation that would map beyond the budget first unmaps free mapped memory (and flushes the
     * local caches) until the map fits. Reserved bytes stay at the budget; the allocating request pays
     * the unmaps, and the load pays the maps that follow.
     */
    ON_MAP,
    /**
     * Allocations map beyond the budget freely (within the cap: a map that would pass the cap still
     * reclaims first); the pool's periodic maintenance unmaps free mapped memory down to the budget,
     * leaving the local caches alone. Reserved bytes may exceed the budget by what the load maps within
     * one maintenance period; the serving threads make no unmap calls.
     */
    PERIODIC
}
