package io.gpupool.memory.trace;

import io.gpupool.memory.ChunkSource;
import io.gpupool.memory.DeviceAllocator;
import io.gpupool.memory.DeviceAllocatorContract;
import io.gpupool.memory.bestfit.BestFitAllocator;

/** A recording tracing allocator must behave exactly like the allocator it wraps. */
class TracingAllocatorContractTest extends DeviceAllocatorContract {
    @Override
    protected DeviceAllocator createAllocator(ChunkSource source) {
        TracingAllocator tracing = new TracingAllocator(new BestFitAllocator(source), 1 << 16);
        tracing.startRecording();
        return tracing;
    }
}
