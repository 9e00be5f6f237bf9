package io.gpupool.model.graph;

import io.gpupool.backend.DeviceGraph;
import io.gpupool.memory.DeviceBlock;

/**
 * One cached graph: the recorded forward of one model for one shape bucket, the pool block its
 * activations live in (held for as long as the graph is cached), the allocation layout inside that
 * block and the uploads the capture saw. Owned by {@link GraphCache}; {@link #destroy} frees both the
 * graph and the block, and is called once, when no replay uses it.
 */
final class CapturedForward {

    private final GraphKey key;
    private final DeviceGraph graph;
    private final DeviceBlock block;
    private final GraphArena arena;
    private final long[] uploadAddresses;
    private final long[] uploadBytes;
    /** Serialises pool calls on the graph stream (see {@link DeviceGraphs}). */
    private final Object graphStreamLock;

    // Guarded by the cache's monitor.
    boolean inUse;
    boolean evictWhenReleased;

    CapturedForward(GraphKey key, DeviceGraph graph, DeviceBlock block, GraphArena arena, long[] uploadAddresses,
                    long[] uploadBytes, Object graphStreamLock) {
        this.graphStreamLock = graphStreamLock;
        this.key = key;
        this.graph = graph;
        this.block = block;
        this.arena = arena;
        this.uploadAddresses = uploadAddresses;
        this.uploadBytes = uploadBytes;
    }

    GraphKey key() {
        return key;
    }

    DeviceGraph graph() {
        return graph;
    }

    GraphArena arena() {
        return arena;
    }

    long[] uploadAddresses() {
        return uploadAddresses;
    }

    long[] uploadBytes() {
        return uploadBytes;
    }

    long blockAddress() {
        return block.address();
    }

    /** Pool bytes the graph holds (its block's size). */
    long blockBytes() {
        return block.size();
    }

    /**
     * Destroys the graph and gives the block back to the pool. Every replay synchronised its stream
     * before letting go of the graph, so no device work still touches the block.
     */
    void destroy() {
        try {
            graph.close();
        } finally {
            synchronized (graphStreamLock) {
                block.release();
            }
        }
    }
}
