package io.gpupool.memory.pool;

import io.gpupool.memory.metric.AllocatorMode;
import io.gpupool.memory.ChunkSource;
import io.gpupool.memory.DeviceAllocator;
import io.gpupool.memory.PoolConfig;
import io.gpupool.memory.DeviceAllocatorContract;

/** The pool without stream-local caches against the contract every allocator meets. */
class DevicePoolGlobalOnlyContractTest extends DeviceAllocatorContract {
    @Override
    protected DeviceAllocator createAllocator(ChunkSource source) {
        return new DevicePool(source, PoolConfig.defaults().withMode(AllocatorMode.GLOBAL_ONLY));
    }
}
