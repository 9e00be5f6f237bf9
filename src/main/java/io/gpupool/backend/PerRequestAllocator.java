package io.gpupool.backend;

import io.gpupool.memory.AllocationStream;
import io.gpupool.memory.DeviceAllocator;
import io.gpupool.memory.DeviceBlock;
import io.gpupool.memory.metric.AllocatorMetrics;
import io.gpupool.memory.metric.BasicAllocatorMetrics;

import java.util.concurrent.atomic.LongAdder;

/**
 * Base of the baseline allocators that go to the device for every request ({@code DIRECT},
 * {@code CUDA_ASYNC}): no caching, no pooling, just the native call, so their cost can be measured
 * against the pool's. Subclasses supply the native allocate and free.
 *
 * <p>Sizes are rounded up to 256 bytes. Outstanding blocks are counted ({@link LongAdder}s, no lock)
 * so that {@link #close()} can report leaks.
 *
 * <p>Statistics: allocate and free report to a {@link BasicAllocatorMetrics} ({@link #basicMetrics()}),
 * in which every block is its own reservation. That is what {@link #metrics()} shows unless a subclass
 * knows better where reserved memory is counted (the driver's pool behind cuda-async keeps what is
 * freed), in which case it overrides {@link #metrics()} with a view over {@link #basicMetrics()}; the
 * allocate/free path never calls {@link #metrics()}, so such a view costs nothing there.
 */
public abstract class PerRequestAllocator implements DeviceAllocator, DeviceBlock.Owner {

    /** Every block is a multiple of this many bytes, and at least this aligned. */
    public static final long GRANULE = 256;

    private final LongAdder outstandingBlocks = new LongAdder();
    private final LongAdder outstandingBytes = new LongAdder();
    private volatile boolean closed;
    private volatile BasicAllocatorMetrics metrics;

    /** Returns the address of {@code size} fresh bytes, or throws OutOfDeviceMemoryException. */
    protected abstract long allocateNative(long size, AllocationStream stream);

    /** Gives back memory from {@link #allocateNative}. */
    protected abstract void freeNative(long address, long size, AllocationStream stream);

    /** A name for messages, e.g. {@code cuda:0 direct}. */
    protected abstract String describe();

    @Override
    public final DeviceBlock allocate(long bytes, AllocationStream stream) {
        if (bytes <= 0) {
            throw new IllegalArgumentException(describe() + ": allocation size must be > 0 bytes, got " + bytes);
        }
        if (closed) {
            throw new IllegalStateException(describe() + " is closed");
        }
        long size = (bytes + GRANULE - 1) & -GRANULE;
        long started = System.nanoTime();
        long address;
        try {
            address = allocateNative(size, stream);
        } catch (RuntimeException e) {
            basicMetrics().onFailure();
            throw e;
        }
        // Every block is its own device allocation: reserved and allocated move together.
        BasicAllocatorMetrics counts = basicMetrics();
        counts.onReserve(size);
        counts.onAllocate(bytes, size, System.nanoTime() - started);
        outstandingBlocks.increment();
        outstandingBytes.add(size);
        return new DeviceBlock(this, address, size, bytes, stream, 0L, null);
    }

    @Override
    public final void free(DeviceBlock block) {
        freeNative(block.address(), block.size(), block.stream());
        outstandingBlocks.decrement();
        outstandingBytes.add(-block.size());
        BasicAllocatorMetrics counts = basicMetrics();
        counts.onFree(block.requestedBytes(), block.size());
        counts.onUnreserve(block.size());
    }

    /** Per-block statistics: reserved = allocated = the blocks outstanding. Override for another view. */
    @Override
    public AllocatorMetrics metrics() {
        return basicMetrics();
    }

    /** What allocate and free report to (reserved counted per block); the base of a subclass's {@link #metrics()}. */
    protected final BasicAllocatorMetrics basicMetrics() {
        BasicAllocatorMetrics current = metrics;
        if (current == null) {
            // Created lazily because describe() and mode() are implemented by the subclass.
            synchronized (this) {
                if (metrics == null) {
                    metrics = new BasicAllocatorMetrics(describe(), mode());
                }
                current = metrics;
            }
        }
        return current;
    }

    /** Blocks handed out and not yet released. */
    public long outstandingBlocks() {
        return outstandingBlocks.sum();
    }

    @Override
    public void close() {
        closed = true;
        long blocks = outstandingBlocks.sum();
        if (blocks != 0) {
            throw new IllegalStateException(describe() + " closed with " + blocks + " block(s), "
                    + outstandingBytes.sum() + " bytes still outstanding; release them first");
        }
    }

    @Override
    public String toString() {
        return describe();
    }
}
