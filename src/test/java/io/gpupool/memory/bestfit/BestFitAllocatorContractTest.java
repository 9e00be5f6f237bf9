package io.gpupool.memory.bestfit;

import io.gpupool.memory.ChunkSource;
import io.gpupool.memory.DeviceAllocator;
import io.gpupool.memory.DeviceAllocatorContract;

class BestFitAllocatorContractTest extends DeviceAllocatorContract {
    @Override
    protected DeviceAllocator createAllocator(ChunkSource source) {
        return new BestFitAllocator(source);
    }
}
