package io.gpupool.backend.cuda;

import io.gpupool.memory.OutOfDeviceMemoryException;
import jcuda.driver.CUresult;

import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.LinkedBlockingQueue;

import static jcuda.driver.JCudaDriver.CU_MEMHOSTALLOC_PORTABLE;
import static jcuda.driver.JCudaDriver.cuMemFreeHost;
import static jcuda.driver.JCudaDriver.cuMemHostAlloc;

/**
 * A bounded pool of page-locked (pinned) host buffers through which a device's streams copy.
 *
 * <pre>
 *   chunk 0 (cuMemHostAlloc, slotsPerChunk × slotBytes)    chunk 1 ...   (at most maxSlots slots)
 *   [ slot | slot | slot | slot ]                          [ slot | ... ]
 *        ▲ acquire() takes a free slot; release() puts it back
 * </pre>
 *
 * <ol>
 *   <li>acquire: take a free slot if one is queued (no lock).</li>
 *   <li>Otherwise, under the grow lock, pin one more chunk if the pool is below its bound and queue
 *       its slots.</li>
 *   <li>Otherwise block until a stream's worker releases a slot (its copy finished).</li>
 * </ol>
 *
 * This is a deliberately small fixed-slot pool: the buddy {@code DevicePool} had not landed when it
 * was written; once it has, pinned chunks can be served by it instead. Chunks are freed by
 * {@link #close()}, never by the GC.
 */
final class PinnedStagingPool implements AutoCloseable {

    private final String label;
    private final long slotBytes;
    private final int slotsPerChunk;
    private final int maxSlots;
    private final LinkedBlockingQueue<Long> free = new LinkedBlockingQueue<>();
    private final List<Cu.HostPtr> chunks = new ArrayList<>();
    private final CudaDevice device;
    private int slots;

    PinnedStagingPool(CudaDevice device, long slotBytes, int slotsPerChunk, int maxSlots) {
        if (slotBytes <= 0 || slotBytes % 256 != 0) {
            throw new IllegalArgumentException("staging slot size must be a positive multiple of 256, got " + slotBytes);
        }
        if (slotsPerChunk <= 0 || maxSlots < slotsPerChunk) {
            throw new IllegalArgumentException("staging needs 0 < slotsPerChunk <= maxSlots, got "
                    + slotsPerChunk + " and " + maxSlots);
        }
        this.device = device;
        this.label = device.label() + " staging";
        this.slotBytes = slotBytes;
        this.slotsPerChunk = slotsPerChunk;
        this.maxSlots = maxSlots;
    }

    long slotBytes() {
        return slotBytes;
    }

    /** Bytes of pinned host memory currently held. */
    synchronized long pinnedBytes() {
        return (long) slots * slotBytes;
    }

    static MemorySegment segment(long address, long bytes) {
        return MemorySegment.ofAddress(address).reinterpret(bytes);
    }

    /** A free slot's address; blocks while every slot is in flight and the pool is at its bound. */
    long acquire() {
        Long slot = free.poll();
        if (slot != null) {
            return slot; // fast path: a free slot was queued
        }
        grow();
        boolean interrupted = false;
        try {
            while (true) {
                try {
                    return free.take(); // at the bound: wait for a copy to finish
                } catch (InterruptedException e) {
                    interrupted = true;
                }
            }
        } finally {
            if (interrupted) {
                Thread.currentThread().interrupt();
            }
        }
    }

    void release(long slot) {
        free.add(slot);
    }

    private synchronized void grow() {
        if (!free.isEmpty() || slots + slotsPerChunk > maxSlots) {
            return;
        }
        long bytes = slotBytes * slotsPerChunk;
        device.makeCurrent();
        Cu.HostPtr chunk = new Cu.HostPtr();
        int result = cuMemHostAlloc(chunk, bytes, CU_MEMHOSTALLOC_PORTABLE);
        if (result == CUresult.CUDA_ERROR_OUT_OF_MEMORY) {
            if (slots > 0) {
                return; // keep working with the slots we have
            }
            throw new OutOfDeviceMemoryException(bytes, label + ": cannot pin " + bytes + " bytes of host memory");
        }
        Cu.check("cuMemHostAlloc", result, bytes + " bytes for " + label);
        chunks.add(chunk);
        slots += slotsPerChunk;
        long base = chunk.address();
        for (int i = 0; i < slotsPerChunk; i++) {
            free.add(base + i * slotBytes);
        }
    }

    /** Frees every pinned chunk; streams of this device must be closed first. */
    @Override
    public synchronized void close() {
        device.makeCurrent();
        for (Cu.HostPtr chunk : chunks) {
            Cu.check("cuMemFreeHost", cuMemFreeHost(chunk));
        }
        chunks.clear();
        free.clear();
        slots = 0;
    }
}
