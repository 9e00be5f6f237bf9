package io.gpupool.memory.metric;

/**
 * Free blocks of one buddy order in the global level.
 *
 * @param order      0 for the minimum block, each order doubles
 * @param blockBytes size of a block of this order
 * @param freeBlocks free blocks of this order right now
 */
public record FreeOrderMetric(int order, long blockBytes, long freeBlocks) {
}
