package io.gpupool.memory;

/** The two-level pool against the contract every allocator meets. */
class DevicePoolContractTest extends DeviceAllocatorContract {
    @Override
    protected DeviceAllocator createAllocator(ChunkSource source) {
        return new DevicePool(source, PoolConfig.defaults());
    }
}
