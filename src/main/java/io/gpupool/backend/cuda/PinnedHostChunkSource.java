package io.gpupool.backend.cuda;

import io.gpupool.memory.ChunkSource;

import static jcuda.driver.JCudaDriver.CU_MEMHOSTALLOC_PORTABLE;
import static jcuda.driver.JCudaDriver.cuMemFreeHost;
import static jcuda.driver.JCudaDriver.cuMemHostAlloc;

/**
 * Chunks of page-locked host memory (cuMemHostAlloc, portable to every context) for the pool that
 * serves a device's staging buffers. Addresses are host addresses; page aligned.
 */
final class PinnedHostChunkSource implements ChunkSource {

    private final CudaDevice device;
    private final long capacity;

    PinnedHostChunkSource(CudaDevice device, long capacity) {
        this.device = device;
        this.capacity = capacity;
    }

    @Override
    public long allocate(long bytes) {
        if (bytes <= 0) {
            throw new IllegalArgumentException("chunk size must be > 0 bytes, got " + bytes);
        }
        device.makeCurrent();
        Cu.HostPtr pointer = new Cu.HostPtr();
        Cu.checkAlloc("cuMemHostAlloc", cuMemHostAlloc(pointer, bytes, CU_MEMHOSTALLOC_PORTABLE), bytes, name());
        return pointer.address();
    }

    @Override
    public void free(long address, long bytes) {
        device.makeCurrent();
        Cu.check("cuMemFreeHost", cuMemFreeHost(Cu.host(address)), bytes + " bytes at 0x" + Long.toHexString(address));
    }

    @Override
    public long capacityBytes() {
        return capacity;
    }

    @Override
    public String name() {
        return device.label() + " pinned";
    }
}
