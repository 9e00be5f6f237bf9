package io.gpupool.model;

import io.gpupool.backend.DeviceStream;
import io.gpupool.kernels.TensorOps;
import io.gpupool.memory.DeviceAllocator;

/**
 * Where models are loaded: the stream that uploads the weights, the allocator of the long-lived
 * weight region (kept apart from the per-request stream caches, so weights never fragment them),
 * and the kernels of that device (used to plan each model's scratch space).
 */
public record LoadTarget(DeviceStream stream, DeviceAllocator weightAllocator, TensorOps ops) {
}
