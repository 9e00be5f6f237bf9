package io.gpupool.memory;

class DevicePoolGlobalOnlyContractTest extends DeviceAllocatorContract {
    @Override
    protected DeviceAllocator createAllocator(ChunkSource source) {
        return new DevicePool(source, PoolConfig.defaults().withMode(AllocatorMode.GLOBAL_ONLY));
    }
}
