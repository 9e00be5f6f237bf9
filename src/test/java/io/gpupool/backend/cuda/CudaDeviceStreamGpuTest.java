package io.gpupool.backend.cuda;

import io.gpupool.backend.ComputeBackend;
import io.gpupool.backend.DeviceStream;
import io.gpupool.backend.DeviceStreamContract;
import io.gpupool.backend.KernelFunction;
import io.gpupool.memory.metric.AllocatorMode;
import io.gpupool.memory.DeviceAllocator;
import io.gpupool.memory.DeviceBlock;
import org.junit.jupiter.api.Tag;

/**
 * The backend contract on a real GPU. Staging buffers are made small (64 KiB, at most 8) so that the
 * contract's 9 MiB copies go through many pieces and the bounded pool has to recycle slots.
 */
@Tag("gpu")
class CudaDeviceStreamGpuTest extends DeviceStreamContract {

    private DeviceAllocator scratchAllocator;
    private DeviceBlock scratch;
    private KernelFunction spin;

    @Override
    protected ComputeBackend createBackend() {
        return CudaTestSupport.backendOrSkip(CudaBackend.Options.defaults().withStaging(64 << 10, 2, 8));
    }

    @Override
    protected void occupy(DeviceStream stream, long millis) {
        if (spin == null) {
            spin = device.loadModule("backend_test_kernels", CudaTestSupport.testPtx()).function("spin_then_fill");
            scratchAllocator = device.nativeAllocator(AllocatorMode.DIRECT).orElseThrow();
            scratch = scratchAllocator.allocate(256, stream);
        }
        CudaTestSupport.spinThenFill(stream, spin, scratch.address(), 1, 0, millis);
    }

    @Override
    protected void releaseTestResources() {
        if (scratch != null) {
            scratch.release();
            scratchAllocator.close();
        }
    }
}
