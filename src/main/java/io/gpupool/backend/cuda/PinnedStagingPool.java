package io.gpupool.backend.cuda;

import io.gpupool.memory.AllocationStream;
import io.gpupool.memory.metric.AllocatorMode;
import io.gpupool.memory.DeviceBlock;
import io.gpupool.memory.pool.DevicePool;
import io.gpupool.memory.GrowthPolicy;
import io.gpupool.memory.PoolConfig;
import io.gpupool.memory.ReclaimOrder;
import io.gpupool.memory.StreamFence;

import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.concurrent.Semaphore;

/**
 * The page-locked (pinned) host buffers through which a device's streams copy, served by the same
 * pool core as device memory: a {@link DevicePool} over {@link PinnedHostChunkSource} chunks.
 *
 * <pre>
 *   CudaStream k ──acquire(slot)──▶ permits (maxSlots) ──▶ DevicePool ──grow──▶ cuMemHostAlloc chunk
 *                                                         local cache of staging stream k
 *   worker of k ──release(slot)──▶ DevicePool (back to k's local cache) ──▶ permit returned
 * </pre>
 *
 * <ol>
 *   <li>acquire: take one of {@code maxSlots} permits (blocks while that many copies are in flight;
 *       this is the bound on pinned memory in use), then allocate one slot from the pool on the
 *       stream's staging twin, so a stream mostly reuses its own cached slots without a lock.</li>
 *   <li>release: return the block to the pool, then the permit. The pool returns chunks idle for
 *       30 s to the driver (cuMemFreeHost) and never reserves more than its cap.</li>
 * </ol>
 *
 * <h2>Why the staging twins' fences are complete</h2>
 * The pool fences memory that moves between streams. A staging slot is only released after the
 * stream's worker has seen the copy's event complete (and, device→host, copied the slot out), and
 * it is only written by the host before its copy is enqueued. At release no device work touches the
 * slot, so each staging twin's {@link AllocationStream#recordFence()} returns an already-complete
 * fence: no stream ever waits on another because of staging.
 */
final class PinnedStagingPool implements AutoCloseable {

    private static final long MIB = 1L << 20;


    /** The staging pool's view of a CUDA stream: same ordinal, complete fences. */
    record StagingStream(int ordinal) implements AllocationStream {
        @Override
        public StreamFence recordFence() {
            return StreamFence.completed();
        }
    }

    private final long slotBytes;
    private final Semaphore permits;
    private final DevicePool pool;
    private final long capBytes;

    PinnedStagingPool(CudaDevice device, long slotBytes, int slotsPerChunk, int maxSlots) {
        if (slotBytes <= 0 || slotBytes % 256 != 0) {
            throw new IllegalArgumentException("staging slot size must be a positive multiple of 256, got " + slotBytes);
        }
        if (slotsPerChunk <= 0 || maxSlots < slotsPerChunk) {
            throw new IllegalArgumentException("staging needs 0 < slotsPerChunk <= maxSlots, got "
                    + slotsPerChunk + " and " + maxSlots);
        }
        this.slotBytes = slotBytes;
        this.permits = new Semaphore(maxSlots);
        PoolConfig config = poolConfig(slotBytes, slotsPerChunk, maxSlots);
        this.capBytes = config.capBytes();
        this.pool = new DevicePool(new PinnedHostChunkSource(device, capBytes), config);
    }

    /**
     * The staging pool's configuration: growth in chunks of {@code slotsPerChunk} slots (at least one
     * 2 MiB block), capped at {@code maxSlots} slots (rounded up to 2 MiB), a local cache of four
     * slots per stream, idle chunks returned after 30 s.
     */
    static PoolConfig poolConfig(long slotBytes, int slotsPerChunk, int maxSlots) {
        long minBlock = 2 * MIB;
        long maxBlock = Math.max(minBlock, Long.highestOneBit(slotBytes - 1) << 1);
        long step = Math.max(maxBlock, roundUp(slotBytes * slotsPerChunk, minBlock));
        long cap = Math.max(step, roundUp(slotBytes * maxSlots, minBlock));
        return new PoolConfig(AllocatorMode.TWO_LEVEL, minBlock, maxBlock, GrowthPolicy.LAZY, 0,
                step, step, cap, 1.0, 4 * slotBytes, 16, Duration.ofSeconds(10), 10, 0,
                Duration.ofSeconds(30), PoolConfig.DEFAULT_MAPPED_SLACK, 0, minBlock, false,
                io.gpupool.memory.BudgetReclaim.ON_MAP, ReclaimOrder.HIGHEST_ADDRESS,
                PoolConfig.DEFAULT_RECLAIM_HYSTERESIS, false, false);
    }

    long slotBytes() {
        return slotBytes;
    }

    /** Most pinned bytes this pool reserves. */
    long capBytes() {
        return capBytes;
    }

    /** Pinned host bytes currently reserved from the driver. */
    long pinnedBytes() {
        return pool.metrics().reservedBytes();
    }

    static MemorySegment segment(long address, long bytes) {
        return MemorySegment.ofAddress(address).reinterpret(bytes);
    }

    /** One slot of {@link #slotBytes()} for {@code stream}; blocks while {@code maxSlots} are in flight. */
    DeviceBlock acquire(StagingStream stream) {
        permits.acquireUninterruptibly();
        try {
            return pool.allocate(slotBytes, stream);
        } catch (RuntimeException e) {
            permits.release();
            throw e;
        }
    }

    void release(DeviceBlock slot) {
        try {
            slot.release();
        } finally {
            permits.release();
        }
    }

    /** Returns all pinned memory; streams of this device must be closed first. */
    @Override
    public void close() {
        pool.close();
    }

    private static long roundUp(long value, long multiple) {
        return (value + multiple - 1) / multiple * multiple;
    }
}
