package io.gpupool.backend.cuda;

import io.gpupool.backend.PerRequestAllocator;
import io.gpupool.memory.AllocationStream;
import io.gpupool.memory.AllocatorMode;

import static jcuda.driver.JCudaDriver.cuMemAllocAsync;
import static jcuda.driver.JCudaDriver.cuMemFreeAsync;

/**
 * The {@link AllocatorMode#CUDA_ASYNC} baseline: the driver's stream-ordered allocator. A block is
 * allocated with cuMemAllocAsync on the requesting stream and freed with cuMemFreeAsync on the same
 * stream (the block's stream). The device's default memory pool gets a release threshold of
 * UINT64_MAX so that freed memory stays cached in the driver instead of going back at each
 * synchronisation. The driver's default reuse policy makes a block freed on stream A and handed to
 * stream B wait for A's work (it follows event dependencies), so cross-stream reuse is safe.
 */
final class CudaAsyncAllocator extends PerRequestAllocator {

    private final CudaDevice device;

    CudaAsyncAllocator(CudaDevice device) {
        this.device = device;
        device.makeCurrent();
        LibCuda lib = LibCuda.get();
        long pool = lib.deviceDefaultMemPool(device.index());
        lib.setMemPoolAttribute(pool, LibCuda.MEMPOOL_ATTR_RELEASE_THRESHOLD, -1L); // UINT64_MAX
    }

    @Override
    protected long allocateNative(long size, AllocationStream stream) {
        CudaStream cuda = cudaStream(stream);
        device.makeCurrent();
        Cu.DevicePtr pointer = new Cu.DevicePtr();
        Cu.checkAlloc("cuMemAllocAsync", cuMemAllocAsync(pointer, size, cuda.handle()), size, describe());
        return pointer.address();
    }

    @Override
    protected void freeNative(long address, long size, AllocationStream stream) {
        CudaStream cuda = cudaStream(stream);
        device.makeCurrent();
        Cu.check("cuMemFreeAsync", cuMemFreeAsync(Cu.device(address), cuda.handle()),
                size + " bytes at 0x" + Long.toHexString(address));
    }

    private CudaStream cudaStream(AllocationStream stream) {
        if (stream instanceof CudaStream cuda && cuda.device() == device) {
            return cuda;
        }
        throw new IllegalArgumentException(describe() + " needs a stream of " + device.label() + ", got " + stream);
    }

    @Override
    protected String describe() {
        return device.label() + " cuda-async";
    }

    @Override
    public AllocatorMode mode() {
        return AllocatorMode.CUDA_ASYNC;
    }
}
