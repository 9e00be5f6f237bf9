package io.gpupool.model;

import io.gpupool.backend.ComputeDevice;
import io.gpupool.backend.DeviceStream;
import io.gpupool.backend.cuda.CudaBackend;
import io.gpupool.kernels.cuda.CudaTensorOps;
import io.gpupool.kernels.cuda.Precision;
import io.gpupool.memory.metric.AllocatorMode;
import io.gpupool.memory.DeviceAllocator;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Tag;

import java.util.Optional;

/**
 * The reference outputs on the CUDA kernels (FP32). Weights from the device's DIRECT allocator;
 * activations from the stream-ordered CUDA_ASYNC allocator where the driver offers it (a request
 * releases a tensor right after enqueueing its last reader), else DIRECT (cuMemFree waits for the
 * device). Skipped, not failed, where no driver or device is present.
 */
@Tag("gpu")
class GpuReferenceOutputsTest extends ReferenceOutputsContract {

    /** The kernels' precision; FP32 here, the one every backend is held to at 1e-4. */
    protected Precision precision() {
        return Precision.FP32;
    }

    @Override
    protected Backend openBackend() {
        Optional<CudaBackend> created = CudaBackend.tryCreate();
        Assumptions.assumeTrue(created.isPresent(), "no CUDA driver or device");
        CudaBackend cuda = created.get();
        ComputeDevice device = cuda.devices().getFirst();
        device.bindToCurrentThread();
        CudaTensorOps ops = new CudaTensorOps(device, precision());
        DeviceAllocator weights = device.nativeAllocator(AllocatorMode.DIRECT).orElseThrow();
        DeviceAllocator requests = device.nativeAllocator(AllocatorMode.CUDA_ASYNC)
                .or(() -> device.nativeAllocator(AllocatorMode.DIRECT)).orElseThrow();
        DeviceStream stream = device.createStream(0);
        return new Backend(stream, weights, requests, ops, () -> {
            stream.close();
            if (requests != weights) {
                requests.close();
            }
            weights.close();
            cuda.close();
        });
    }
}
