package io.gpupool.config;

import io.gpupool.backend.ComputeDevice;
import io.gpupool.kernels.TensorOps;
import io.gpupool.memory.DeviceAllocator;

/**
 * The last say over the kernels a device serves with, before its stream set is built: beans of this type are
 * applied in their order to what {@code gpupool.kernels.*} chose. The server ships none; tests use it to give the
 * host backend kernels that hold pool memory per stream, as cuBLASLt does on CUDA. What the last one returns is
 * closed with the device when it is {@link AutoCloseable}.
 */
@FunctionalInterface
public interface TensorOpsCustomizer {

    /** The kernels to use on {@code device} instead of {@code ops}; {@code activations} is the device's pool. */
    TensorOps customize(ComputeDevice device, TensorOps ops, DeviceAllocator activations);
}
