package io.gpupool.model.testing;

import io.gpupool.memory.AllocationStream;
import io.gpupool.memory.metric.AllocatorMode;
import io.gpupool.memory.DeviceAllocator;
import io.gpupool.memory.DeviceBlock;
import io.gpupool.memory.OutOfDeviceMemoryException;
import io.gpupool.memory.metric.AllocatorMetrics;
import io.gpupool.memory.metric.BasicAllocatorMetrics;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.IdentityHashMap;
import java.util.Map;

/**
 * A test-only allocator over native host memory that counts what is outstanding and the peak, in
 * bytes rounded up to 256 as every DeviceAllocator rounds. Can be told to refuse the n-th allocation.
 */
public final class TrackingAllocator implements DeviceAllocator {

    private final BasicAllocatorMetrics metrics = new BasicAllocatorMetrics("tracking", AllocatorMode.DIRECT);
    private final Map<DeviceBlock, Arena> live = new IdentityHashMap<>();
    private final java.util.List<Arena> freed = new java.util.ArrayList<>();
    private long current;
    private long peak;
    private long allocations;
    private long failAt;

    public synchronized void failAtAllocation(long n) {
        failAt = n;
        allocations = 0;
    }

    @Override
    public synchronized DeviceBlock allocate(long bytes, AllocationStream stream) {
        if (bytes <= 0) {
            throw new IllegalArgumentException("bytes must be positive: " + bytes);
        }
        if (failAt > 0 && ++allocations == failAt) {
            throw new OutOfDeviceMemoryException(bytes, "injected: refusing allocation " + failAt);
        }
        long size = (bytes + 255) / 256 * 256;
        Arena arena = Arena.ofShared();
        MemorySegment segment = arena.allocate(size, 256);
        segment.fill((byte) 0x7f); // garbage, so a kernel that reads before writing is caught
        DeviceBlock block = new DeviceBlock(this::free, segment.address(), size, bytes, stream, 0, null);
        live.put(block, arena);
        metrics.onAllocate(bytes, size, 0);
        current += size;
        peak = Math.max(peak, current);
        return block;
    }

    /**
     * Frees are stream-ordered: work already enqueued may still read the block, so its memory is
     * only returned at {@link #close()} (a test allocator never reuses memory).
     */
    private synchronized void free(DeviceBlock block) {
        freed.add(live.remove(block));
        metrics.onFree(block.requestedBytes(), block.size());
        current -= block.size();
    }

    public synchronized int outstandingBlocks() {
        return live.size();
    }

    public synchronized long currentBytes() {
        return current;
    }

    public synchronized long peakBytes() {
        return peak;
    }

    public synchronized void resetPeak() {
        peak = current;
    }

    @Override
    public AllocatorMetrics metrics() {
        return metrics;
    }

    @Override
    public AllocatorMode mode() {
        return AllocatorMode.DIRECT;
    }

    @Override
    public synchronized void close() {
        freed.forEach(Arena::close);
        freed.clear();
        if (!live.isEmpty()) {
            throw new IllegalStateException(live.size() + " blocks outstanding");
        }
    }
}
