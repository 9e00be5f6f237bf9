package io.gpupool.model.graph;

import io.gpupool.memory.AllocationStream;
import io.gpupool.memory.metric.AllocatorMode;
import io.gpupool.memory.DeviceAllocator;
import io.gpupool.memory.DeviceBlock;
import io.gpupool.memory.metric.AllocatorMetrics;
import io.gpupool.memory.metric.BasicAllocatorMetrics;

import java.util.Arrays;

/**
 * The allocator of a dry run (see {@link ForwardCapture}): hands out addresses that are never
 * dereferenced (no device work runs) and writes down the size and lifetime of every allocation, from
 * which {@link GraphMemoryLayout#pack} places them in one block. One thread, one dry run.
 */
final class AllocationRecorder implements DeviceAllocator {

    /** Far above any real address, so a kernel that did run by mistake faults rather than corrupts. */
    private static final long FAKE_BASE = 0x7f00_0000_0000_0000L;

    private final BasicAllocatorMetrics metrics = new BasicAllocatorMetrics("graph dry run", AllocatorMode.DIRECT);
    private long[] sizes = new long[64];
    private int[] births = new int[64];
    private int[] deaths = new int[64];
    private int count;
    private int events;
    private long next = FAKE_BASE;

    @Override
    public DeviceBlock allocate(long bytes, AllocationStream stream) {
        if (bytes <= 0) {
            throw new IllegalArgumentException("allocation size must be > 0 bytes, got " + bytes);
        }
        if (count == sizes.length) {
            sizes = Arrays.copyOf(sizes, count * 2);
            births = Arrays.copyOf(births, count * 2);
            deaths = Arrays.copyOf(deaths, count * 2);
        }
        int id = count++;
        long size = GraphMemoryLayout.aligned(bytes);
        sizes[id] = bytes;
        births[id] = events++;
        deaths[id] = -1;
        long address = next;
        next += size;
        return new DeviceBlock(block -> deaths[id] = events++, address, size, bytes, stream, id, null);
    }

    /** The layout of everything allocated so far; allocations still held live to the end. */
    GraphMemoryLayout layout() {
        int end = events + 1;
        int[] died = new int[count];
        for (int i = 0; i < count; i++) {
            died[i] = deaths[i] < 0 ? end : deaths[i];
        }
        return GraphMemoryLayout.pack(Arrays.copyOf(sizes, count), Arrays.copyOf(births, count), died);
    }

    /** The requested sizes in allocation order, for checking that a later run repeats them. */
    long[] requestedSizes() {
        return Arrays.copyOf(sizes, count);
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
