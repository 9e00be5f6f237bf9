package io.gpupool.serving.fake;

import io.gpupool.memory.AllocationStream;
import io.gpupool.memory.metric.AllocatorMode;
import io.gpupool.memory.DeviceAllocator;
import io.gpupool.memory.DeviceBlock;
import io.gpupool.memory.OutOfDeviceMemoryException;
import io.gpupool.memory.metric.AllocatorMetrics;
import io.gpupool.memory.metric.BasicAllocatorMetrics;

import java.util.concurrent.atomic.AtomicLong;

/** An allocator that hands out fake addresses, counts outstanding bytes and refuses beyond a limit. */
public final class CountingAllocator implements DeviceAllocator {

    private final long limitBytes;
    private final AtomicLong next = new AtomicLong(0x1000_0000L);
    public final AtomicLong allocatedBytes = new AtomicLong();
    private final BasicAllocatorMetrics metrics = new BasicAllocatorMetrics("fake", AllocatorMode.DIRECT);

    public CountingAllocator(long limitBytes) {
        this.limitBytes = limitBytes;
    }

    @Override
    public DeviceBlock allocate(long bytes, AllocationStream stream) {
        if (bytes <= 0) {
            throw new IllegalArgumentException("bytes must be positive: " + bytes);
        }
        if (allocatedBytes.addAndGet(bytes) > limitBytes) {
            allocatedBytes.addAndGet(-bytes);
            throw new OutOfDeviceMemoryException(bytes, "requested " + bytes + " bytes, limit " + limitBytes);
        }
        long address = next.getAndAdd((bytes + 255) / 256 * 256);
        return new DeviceBlock(block -> allocatedBytes.addAndGet(-block.size()), address, bytes, bytes, stream, 0, null);
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
    public void close() {
    }
}
