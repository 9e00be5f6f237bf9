package io.gpupool.backend.cuda;

import io.gpupool.backend.PerRequestAllocator;
import io.gpupool.memory.AllocationStream;
import io.gpupool.memory.metric.AllocatorMode;
import io.gpupool.memory.metric.AllocatorCounters;
import io.gpupool.memory.metric.AllocatorMetrics;
import io.gpupool.memory.metric.BasicAllocatorMetrics;
import io.gpupool.memory.metric.LatencyDistribution;

import static jcuda.driver.JCudaDriver.cuMemAllocAsync;
import static jcuda.driver.JCudaDriver.cuMemFreeAsync;

/**
 * The {@link AllocatorMode#CUDA_ASYNC} baseline: the driver's stream-ordered allocator. A block is
 * allocated with cuMemAllocAsync on the requesting stream and freed with cuMemFreeAsync on the same
 * stream (the block's stream). The device's default memory pool gets a release threshold of
 * UINT64_MAX so that freed memory stays cached in the driver instead of going back at each
 * synchronisation. The driver's default reuse policy makes a block freed on stream A and handed to
 * stream B wait for A's work (it follows event dependencies), so cross-stream reuse is safe.
 *
 * <h2>Reserved memory</h2>
 * Because the pool keeps what is freed, the memory this mode holds is not the sum of the blocks
 * outstanding: {@link #metrics()} reads reserved bytes and their peak from the driver
 * (CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT / _HIGH of the device's default pool, through {@link LibCuda}),
 * and {@code resetPeaks()} resets the driver's high-water marks (reserved and used) along with the
 * allocator's own. The marks are also reset when the allocator is created, so a run starts clean.
 * Allocated and requested bytes, counters and latency are the allocator's own, as in the other modes.
 * Only reads of the metrics call the driver: allocate and free report to the per-block counts as
 * before and never read an attribute.
 */
final class CudaAsyncAllocator extends PerRequestAllocator {

    private final CudaDevice device;
    private final LibCuda lib;
    /** The device's default memory pool (a CUmemoryPool handle). */
    private final long pool;
    private final DriverPoolMetrics metrics;

    CudaAsyncAllocator(CudaDevice device) {
        this.device = device;
        device.makeCurrent();
        this.lib = LibCuda.get();
        this.pool = lib.deviceDefaultMemPool(device.index());
        lib.setMemPoolAttribute(pool, LibCuda.MEMPOOL_ATTR_RELEASE_THRESHOLD, -1L); // UINT64_MAX
        resetDriverHighMarks();
        this.metrics = new DriverPoolMetrics(basicMetrics());
    }

    /** The allocator's statistics with reserved bytes and their peak as the driver's pool counts them. */
    @Override
    public AllocatorMetrics metrics() {
        return metrics;
    }

    /** Sets the pool's reserved and used high-water marks to 0, which the driver takes as "reset". */
    private void resetDriverHighMarks() {
        device.makeCurrent();
        lib.setMemPoolAttribute(pool, LibCuda.MEMPOOL_ATTR_RESERVED_MEM_HIGH, 0L);
        lib.setMemPoolAttribute(pool, LibCuda.MEMPOOL_ATTR_USED_MEM_HIGH, 0L);
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

    /**
     * The per-block counts with reserved memory read from the driver at each call (a few FFM calls; no
     * lock of ours). A read that fails (the context is gone at shutdown) answers the last value read, so
     * a late scrape does not throw. The peak is at least the current value, whatever the driver
     * reports right after a reset.
     */
    private final class DriverPoolMetrics implements AllocatorMetrics {

        private final BasicAllocatorMetrics counts;
        private volatile long lastReserved;
        private volatile long lastPeakReserved;

        DriverPoolMetrics(BasicAllocatorMetrics counts) {
            this.counts = counts;
        }

        @Override
        public String name() {
            return counts.name();
        }

        @Override
        public AllocatorMode mode() {
            return counts.mode();
        }

        @Override
        public long reservedBytes() {
            try {
                device.makeCurrent();
                lastReserved = lib.memPoolAttribute(pool, LibCuda.MEMPOOL_ATTR_RESERVED_MEM_CURRENT);
            } catch (RuntimeException unreadable) {
                // keep the last value read
            }
            return lastReserved;
        }

        @Override
        public long peakReservedBytes() {
            long current = reservedBytes();
            try {
                lastPeakReserved = Math.max(current,
                        lib.memPoolAttribute(pool, LibCuda.MEMPOOL_ATTR_RESERVED_MEM_HIGH));
            } catch (RuntimeException unreadable) {
                lastPeakReserved = Math.max(current, lastPeakReserved);
            }
            return lastPeakReserved;
        }

        @Override
        public long allocatedBytes() {
            return counts.allocatedBytes();
        }

        @Override
        public long requestedBytes() {
            return counts.requestedBytes();
        }

        @Override
        public long peakAllocatedBytes() {
            return counts.peakAllocatedBytes();
        }

        @Override
        public long peakRequestedBytes() {
            return counts.peakRequestedBytes();
        }

        @Override
        public void resetPeaks() {
            counts.resetPeaks();
            resetDriverHighMarks();
        }

        @Override
        public AllocatorCounters counters() {
            return counts.counters();
        }

        @Override
        public LatencyDistribution allocationLatency() {
            return counts.allocationLatency();
        }
    }
}
