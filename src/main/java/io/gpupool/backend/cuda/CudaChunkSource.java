package io.gpupool.backend.cuda;

import io.gpupool.memory.ChunkSource;

import static jcuda.driver.JCudaDriver.cuMemAlloc;
import static jcuda.driver.JCudaDriver.cuMemFree;

/**
 * Chunks of plain device memory: cuMemAlloc / cuMemFree (never managed memory). cuMemAlloc returns
 * 256-byte (in practice 2 MiB for large sizes) aligned addresses. Frees are synchronous, which the
 * {@link ChunkSource} stream rules allow.
 */
public final class CudaChunkSource implements ChunkSource {

    private final CudaDevice device;

    CudaChunkSource(CudaDevice device) {
        this.device = device;
    }

    @Override
    public long allocate(long bytes) {
        if (bytes <= 0) {
            throw new IllegalArgumentException("chunk size must be > 0 bytes, got " + bytes);
        }
        device.makeCurrent();
        Cu.DevicePtr pointer = new Cu.DevicePtr();
        Cu.checkAlloc("cuMemAlloc", cuMemAlloc(pointer, bytes), bytes, name());
        return pointer.address();
    }

    @Override
    public void free(long address, long bytes) {
        device.makeCurrent();
        Cu.check("cuMemFree", cuMemFree(Cu.device(address)), bytes + " bytes at 0x" + Long.toHexString(address));
    }

    @Override
    public long capacityBytes() {
        return device.totalMemory();
    }

    @Override
    public String name() {
        return device.label();
    }
}
