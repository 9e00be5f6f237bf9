package io.gpupool.memory.metric;

import java.util.List;

/**
 * Optional extra a pool's metrics may implement: every chunk described block by block, for the
 * operators' buddy map. Read without the allocation lock, so a layout taken while allocations run
 * may mix two moments; it is a picture, not an invariant check. Costs O(blocks): for dashboards
 * polled every few seconds, not for meters.
 */
public interface BlockLayoutMetric {

    /** Every chunk in address order with its leaf blocks in address order. */
    List<ChunkBlocks> layout();

    /** State of a leaf block of the buddy tree. */
    enum BlockState {
        /** In the global level's free lists. */
        FREE,
        /** Handed out to a caller. */
        ALLOCATED,
        /** Free but held by a stream's local cache. */
        CACHED,
        /** A minimum block carved into small objects (the small-object cache's slab). */
        SPLIT
    }

    /** A leaf block: offset from the chunk's base, size, state. */
    record Block(long offset, long bytes, BlockState state) {
    }

    /** One chunk and its leaf blocks. */
    record ChunkBlocks(long address, long bytes, boolean dedicated, List<Block> blocks) {
    }
}
