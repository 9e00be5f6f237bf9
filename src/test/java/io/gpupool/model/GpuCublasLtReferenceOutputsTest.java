package io.gpupool.model;

import io.gpupool.backend.ComputeDevice;
import io.gpupool.backend.DeviceStream;
import io.gpupool.backend.MatmulLibrary;
import io.gpupool.backend.cuda.CudaBackend;
import io.gpupool.kernels.cuda.CudaTensorOps;
import io.gpupool.kernels.cuda.Precision;
import io.gpupool.kernels.cuda.KernelOptions;
import io.gpupool.memory.metric.AllocatorMode;
import io.gpupool.memory.DeviceAllocator;
import io.gpupool.memory.pool.DevicePool;
import io.gpupool.memory.PoolConfig;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Tag;

import java.util.Optional;

/**
 * The reference outputs with every linear layer on cuBLASLt in FP32 (CUBLAS_COMPUTE_32F, no TF32): held to the same
 * 1e-4 against transformers as gpupool's own FP32 kernels. Activations and workspaces come from a {@link DevicePool},
 * as in the server.
 */
@Tag("gpu")
class GpuCublasLtReferenceOutputsTest extends ReferenceOutputsContract {

    /** The opt-in kernel paths these ops run with (none here). */
    KernelOptions options() {
        return KernelOptions.DEFAULT;
    }

    @Override
    protected Backend openBackend() {
        Optional<CudaBackend> created = CudaBackend.tryCreate();
        Assumptions.assumeTrue(created.isPresent(), "no CUDA driver or device");
        CudaBackend cuda = created.get();
        ComputeDevice device = cuda.devices().getFirst();
        device.bindToCurrentThread();
        MatmulLibrary library = device.matmulLibrary(null).orElseThrow(() ->
                new AssertionError("cuBLASLt could not be loaded on this GPU machine"));
        DevicePool pool = new DevicePool(device.chunkSource(), PoolConfig.defaults());
        CudaTensorOps ops = new CudaTensorOps(device, Precision.FP32, library, pool, options());
        DeviceAllocator weights = device.nativeAllocator(AllocatorMode.DIRECT).orElseThrow();
        DeviceStream stream = device.createStream(0);
        return new Backend(stream, weights, pool, ops, () -> {
            stream.synchronize();
            ops.close();
            stream.close();
            pool.close();
            weights.close();
            cuda.close();
        });
    }
}
