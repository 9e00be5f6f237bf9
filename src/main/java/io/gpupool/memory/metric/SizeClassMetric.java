package io.gpupool.memory.metric;

/**
 * One size class of the small-object cache (requests below the minimum block).
 *
 * @param index       class index, ascending by size
 * @param objectBytes size of each object of this class
 * @param slabBytes   size of the buddy run each slab of this class is carved from
 * @param slabs       slabs currently held by the class
 * @param liveObjects objects handed out or held in local caches
 * @param freeObjects objects free in the class's slabs
 */
public record SizeClassMetric(int index, long objectBytes, long slabBytes, long slabs, long liveObjects,
                              long freeObjects) {
}
