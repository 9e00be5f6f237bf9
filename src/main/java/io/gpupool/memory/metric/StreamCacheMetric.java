package io.gpupool.memory.metric;

/**
 * One stream's local cache.
 *
 * @param ordinal     the stream's {@code AllocationStream.ordinal()}
 * @param cachedBytes free bytes held by the cache
 * @param cachedBlocks free blocks and small objects held by the cache
 * @param hits        allocations served by the cache
 * @param misses      allocations that had to go to the global level
 */
public record StreamCacheMetric(int ordinal, long cachedBytes, long cachedBlocks, long hits, long misses) {

    /** hits / (hits + misses), or 0 before the first allocation. */
    public double hitRatio() {
        long total = hits + misses;
        return total == 0 ? 0.0 : (double) hits / total;
    }
}
