package io.gpupool.model.graph;

import io.gpupool.memory.AllocationStream;
import io.gpupool.memory.metric.AllocatorMode;
import io.gpupool.memory.DeviceAllocator;
import io.gpupool.memory.DeviceBlock;
import io.gpupool.memory.metric.AllocatorMetrics;
import io.gpupool.memory.metric.BasicAllocatorMetrics;

/**
 * The allocator a captured forward runs with, at capture and at every replay: the {@code i}-th
 * allocation gets {@code base + layout.offset(i)} inside the graph's pool block, so the replayed host
 * code sees exactly the addresses the graph was recorded with. Releases return nothing (the block
 * stays the graph's). An allocation of another size than the dry run recorded means the forward took
 * another path: {@link GraphMismatchException}.
 *
 * <p>Single-threaded: one forward at a time uses an arena ({@link GraphCache} hands a graph to one
 * request at a time).
 */
final class GraphArena implements DeviceAllocator {

    private static final DeviceBlock.Owner KEEP = block -> { };

    private final GraphMemoryLayout layout;
    private final long[] requested;
    private final long base;
    private final BasicAllocatorMetrics metrics = new BasicAllocatorMetrics("graph arena", AllocatorMode.DIRECT);
    private int next;

    GraphArena(GraphMemoryLayout layout, long[] requested, long base) {
        this.layout = layout;
        this.requested = requested;
        this.base = base;
    }

    /** Starts a new forward: the next allocation is the first again. */
    void rewind() {
        next = 0;
    }

    /** Fails unless the forward made every allocation the dry run made. */
    void checkComplete() {
        if (next != layout.count()) {
            throw new GraphMismatchException("the forward made " + next + " allocations, the capture "
                    + layout.count());
        }
    }

    @Override
    public DeviceBlock allocate(long bytes, AllocationStream stream) {
        int i = next;
        if (i >= layout.count() || requested[i] != bytes) {
            throw new GraphMismatchException("allocation " + i + " asks for " + bytes + " bytes, the capture made "
                    + (i >= layout.count() ? "only " + layout.count() + " allocations" : requested[i] + " bytes"));
        }
        next = i + 1;
        return new DeviceBlock(KEEP, base + layout.offset(i), layout.size(i), bytes, stream, i, null);
    }

    @Override
    public AllocatorMode mode() {
        return AllocatorMode.DIRECT;
    }

    @Override
    public AllocatorMetrics metrics() {
        return metrics;
    }

    @Override
    public void close() {
    }
}
