package io.gpupool.backend.host;

import io.gpupool.backend.ComputeDevice;
import io.gpupool.backend.DeviceStream;
import io.gpupool.backend.KernelModule;
import io.gpupool.memory.metric.AllocatorMode;
import io.gpupool.memory.ChunkSource;
import io.gpupool.memory.DeviceAllocator;

import java.util.Optional;

/**
 * The single device "host": off-heap memory within a fixed budget, streams that are worker threads.
 * Kernel modules do not exist here; host kernels run through {@link DeviceStream#enqueueHostTask}.
 */
final class HostDevice implements ComputeDevice {

    private final HostMemoryBudget budget;
    private final HostChunkSource chunkSource;

    HostDevice(long budgetBytes) {
        this.budget = new HostMemoryBudget(budgetBytes);
        this.chunkSource = new HostChunkSource("host", budget);
    }

    @Override
    public int index() {
        return 0;
    }

    @Override
    public String name() {
        return "host";
    }

    @Override
    public long totalMemory() {
        return budget.capacity();
    }

    @Override
    public long freeMemory() {
        return budget.capacity() - budget.used();
    }

    @Override
    public ChunkSource chunkSource() {
        return chunkSource;
    }

    /** {@link AllocatorMode#DIRECT} gives a fresh aligned_alloc/free allocator; other modes are empty. */
    @Override
    public Optional<DeviceAllocator> nativeAllocator(AllocatorMode mode) {
        return mode == AllocatorMode.DIRECT ? Optional.of(new HostDirectAllocator(budget)) : Optional.empty();
    }

    @Override
    public DeviceStream createStream(int ordinal) {
        if (ordinal < 0) {
            throw new IllegalArgumentException("stream ordinal must be >= 0, got " + ordinal);
        }
        return new HostStream(this, ordinal);
    }

    @Override
    public KernelModule loadModule(String name, byte[] image) {
        throw new UnsupportedOperationException("the host backend loads no kernel modules (asked for " + name
                + "); host kernels run through DeviceStream.enqueueHostTask");
    }

    @Override
    public void bindToCurrentThread() {
        // nothing to bind on the host
    }

    @Override
    public String toString() {
        return "host device (" + budget.capacity() + " bytes budget)";
    }
}
