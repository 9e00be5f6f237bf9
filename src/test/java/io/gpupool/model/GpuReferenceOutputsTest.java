package io.gpupool.model;

import io.gpupool.backend.ComputeBackend;
import io.gpupool.backend.ComputeDevice;
import io.gpupool.backend.DeviceStream;
import io.gpupool.kernels.TensorOps;
import io.gpupool.memory.AllocatorMode;
import io.gpupool.memory.DeviceAllocator;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Tag;

import java.util.Optional;

/**
 * The reference outputs on the CUDA kernels. Reached reflectively so this test compiles before
 * {@code backend.cuda.CudaBackend} and {@code kernels.cuda.CudaTensorOps} exist; skipped (not
 * failed) where either class or a device is missing.
 */
@Tag("gpu")
class GpuReferenceOutputsTest extends ReferenceOutputsContract {

    @Override
    protected Backend openBackend() throws Exception {
        Class<?> backendClass;
        Class<?> opsClass;
        try {
            backendClass = Class.forName("io.gpupool.backend.cuda.CudaBackend");
            opsClass = Class.forName("io.gpupool.kernels.cuda.CudaTensorOps");
        } catch (ClassNotFoundException e) {
            Assumptions.abort("CUDA backend or kernels not built: " + e.getMessage());
            throw e;
        }
        Optional<?> created = (Optional<?>) backendClass.getMethod("tryCreate").invoke(null);
        Assumptions.assumeTrue(created.isPresent(), "no CUDA driver or device");
        ComputeBackend cuda = (ComputeBackend) created.get();
        ComputeDevice device = cuda.devices().getFirst();
        device.bindToCurrentThread();
        TensorOps ops = (TensorOps) opsClass.getConstructor(ComputeDevice.class).newInstance(device);
        DeviceAllocator direct = device.nativeAllocator(AllocatorMode.DIRECT).orElseThrow();
        DeviceStream stream = device.createStream(0);
        return new Backend(stream, direct, direct, ops, () -> {
            stream.close();
            direct.close();
            cuda.close();
        });
    }
}
