package io.gpupool.serving;

import io.gpupool.backend.ComputeDevice;
import io.gpupool.kernels.TensorOps;
import io.gpupool.memory.DeviceAllocator;

/**
 * Everything the server holds for one device: the activation allocator (the pool), a separate
 * allocator for model weights (long-lived, so they never fragment the pool), the device's kernels
 * and its stream set with the request queue.
 */
public record DeviceRuntime(ComputeDevice device, DeviceAllocator allocator, DeviceAllocator weightsAllocator,
                            TensorOps ops, DeviceWorker worker) {

    public int index() {
        return device.index();
    }
}
