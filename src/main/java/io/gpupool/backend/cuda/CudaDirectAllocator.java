package io.gpupool.backend.cuda;

import io.gpupool.backend.PerRequestAllocator;
import io.gpupool.memory.AllocationStream;
import io.gpupool.memory.metric.AllocatorMode;

import static jcuda.driver.JCudaDriver.cuMemAlloc;
import static jcuda.driver.JCudaDriver.cuMemFree;

/**
 * The {@link AllocatorMode#DIRECT} baseline: cuMemAlloc and cuMemFree for every block. cuMemFree
 * waits for the device to stop using the memory, so cross-stream reuse is safe, at the price of a
 * device-wide synchronisation per free.
 */
final class CudaDirectAllocator extends PerRequestAllocator {

    private final CudaDevice device;

    CudaDirectAllocator(CudaDevice device) {
        this.device = device;
    }

    @Override
    protected long allocateNative(long size, AllocationStream stream) {
        device.makeCurrent();
        Cu.DevicePtr pointer = new Cu.DevicePtr();
        Cu.checkAlloc("cuMemAlloc", cuMemAlloc(pointer, size), size, describe());
        return pointer.address();
    }

    @Override
    protected void freeNative(long address, long size, AllocationStream stream) {
        device.makeCurrent();
        Cu.check("cuMemFree", cuMemFree(Cu.device(address)), size + " bytes at 0x" + Long.toHexString(address));
    }

    @Override
    protected String describe() {
        return device.label() + " direct";
    }

    @Override
    public AllocatorMode mode() {
        return AllocatorMode.DIRECT;
    }
}
