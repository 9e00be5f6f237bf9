package io.gpupool.memory.pool;

import io.gpupool.memory.ChunkSource;
import io.gpupool.memory.DeviceAllocator;
import io.gpupool.memory.PoolConfig;
import io.gpupool.memory.DeviceAllocatorContract;

/** The two-level pool against the contract every allocator meets. */
class DevicePoolContractTest extends DeviceAllocatorContract {
    @Override
    protected DeviceAllocator createAllocator(ChunkSource source) {
        return new DevicePool(source, PoolConfig.defaults());
    }
}
