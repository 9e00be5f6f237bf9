package io.gpupool.model;

import io.gpupool.backend.DeviceStream;
import io.gpupool.kernels.TensorOps;
import io.gpupool.memory.DeviceAllocator;

/**
 * Everything one request runs with: the leased stream, the allocator whose local cache belongs to
 * that stream, and the kernels of the stream's device. Every intermediate tensor is allocated from
 * {@code allocator} on {@code stream}.
 */
public record ExecutionContext(DeviceStream stream, DeviceAllocator allocator, TensorOps ops) {
}
