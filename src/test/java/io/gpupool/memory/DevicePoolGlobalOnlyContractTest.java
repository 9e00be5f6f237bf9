package io.gpupool.memory;

/** The pool without stream-local caches against the contract every allocator meets. */
class DevicePoolGlobalOnlyContractTest extends DeviceAllocatorContract {
    @Override
    protected DeviceAllocator createAllocator(ChunkSource source) {
        return new DevicePool(source, PoolConfig.defaults().withMode(AllocatorMode.GLOBAL_ONLY));
    }
}
