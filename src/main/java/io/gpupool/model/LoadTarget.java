package io.gpupool.model;

import io.gpupool.backend.DeviceStream;
import io.gpupool.kernels.TensorOps;
import io.gpupool.memory.DeviceAllocator;

/**
 * Where models are loaded: the stream that uploads the weights, the allocator of the long-lived
 * weight region (kept apart from the per-request stream caches, so weights never fragment them),
 * the kernels of that device (used to plan each model's scratch space), and whether the models'
 * execution plans run each forward in one arena ({@code gpupool.serving.request-arena}, see
 * {@code model.plan.ExecutionPlan}).
 */
public record LoadTarget(DeviceStream stream, DeviceAllocator weightAllocator, TensorOps ops, boolean requestArena) {

    /** A target whose models allocate one block per tensor. */
    public LoadTarget(DeviceStream stream, DeviceAllocator weightAllocator, TensorOps ops) {
        this(stream, weightAllocator, ops, false);
    }
}
