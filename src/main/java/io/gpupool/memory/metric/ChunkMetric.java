package io.gpupool.memory.metric;

/**
 * One chunk obtained from the source.
 *
 * @param address   base address
 * @param bytes     size of the chunk
 * @param freeBytes bytes of the chunk in the global free lists (0 for a dedicated chunk in use)
 * @param dedicated true for a chunk that backs one request above the maximum block
 */
public record ChunkMetric(long address, long bytes, long freeBytes, boolean dedicated) {
}
