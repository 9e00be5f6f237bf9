package io.gpupool.memory.metric;

import java.util.List;

/**
 * Statistics of the two-level pool beyond those of every allocator. Like all metrics, read
 * without taking the allocation lock; list-valued getters build a fresh list per call.
 */
public interface PoolMetrics extends AllocatorMetrics {

    /** Free bytes held in all stream-local caches. */
    long cachedBytes();

    /** Per-stream local caches, ordered by ordinal. */
    List<StreamCacheMetric> streams();

    /**
     * The bytes cap of each stream's local cache in force now: the configured cap, lowered under
     * MAPPED and ON_DEMAND growth to a stream's share of the allocated bytes; 0 without local caches.
     */
    default long localCacheCapBytes() {
        return 0;
    }

    /** Free blocks of the global level, one entry per order. */
    List<FreeOrderMetric> freeBlocks();

    /** Free bytes in the global level's free lists. */
    long globalFreeBytes();

    /**
     * The part of {@link #globalFreeBytes()} whose memory still carries an unfinished fence of a
     * stream that freed it: another stream takes it only by waiting for that work, and it cannot be
     * unmapped or returned before the work is done. Walks the free lists (racy, not for hot paths);
     * 0 for allocators without fences.
     */
    default long fencedFreeBytes() {
        return 0;
    }

    /** The largest free block of the global level in bytes. */
    long largestFreeBlockBytes();

    /**
     * Address space reserved under MAPPED growth, mapped or not (0 otherwise); reserved bytes then
     * count only the mapped part.
     */
    default long addressSpaceBytes() {
        return 0;
    }

    /** Calls that mapped memory into reserved address space (MAPPED growth; 0 otherwise). */
    default long mapCalls() {
        return 0;
    }

    /** Calls that unmapped free memory (MAPPED growth; 0 otherwise). */
    default long unmapCalls() {
        return 0;
    }

    /** Physical allocations unmapped but kept to map again (MAPPED growth with retained handles; 0 otherwise). */
    default long retainedHandles() {
        return 0;
    }

    /** Bytes of {@link #retainedHandles()}: device memory, counted in the reserved bytes. */
    default long retainedHandleBytes() {
        return 0;
    }

    /** Physical allocations the pool had the source create (MAPPED growth: one per extent or granule mapped anew). */
    default long physicalCreates() {
        return 0;
    }

    /** Physical allocations the pool had the source release (MAPPED growth). */
    default long physicalReleases() {
        return 0;
    }

    /** Host nanoseconds spent in the source's map calls, failed ones included (MAPPED growth; 0 otherwise). */
    default long mapNanos() {
        return 0;
    }

    /** Host nanoseconds spent in the source's unmap calls (MAPPED growth; 0 otherwise). */
    default long unmapNanos() {
        return 0;
    }

    /**
     * Device-side waits the allocator inserted so that a stream reusing memory another stream freed
     * starts after that stream's work on it (one per fence waited on; 0 for allocators without them).
     */
    default long crossStreamWaits() {
        return 0;
    }

    /**
     * 1 - largest free block / total global free bytes; 0 when nothing is free. Under MAPPED growth
     * the largest block is address space and the free bytes are mapped memory, so it is usually 0:
     * any free granule can be mapped anywhere.
     */
    default double fragmentation() {
        long free = globalFreeBytes();
        return free == 0 ? 0.0 : Math.max(0.0, 1.0 - (double) largestFreeBlockBytes() / free);
    }

    /** The small-object size classes that hold slabs or objects. */
    List<SizeClassMetric> smallClasses();

    /** All chunks currently obtained from the source. */
    List<ChunkMetric> chunks();
}
