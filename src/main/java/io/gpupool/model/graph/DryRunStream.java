package io.gpupool.model.graph;

import io.gpupool.backend.ComputeDevice;
import io.gpupool.backend.DeviceStream;
import io.gpupool.backend.KernelFunction;
import io.gpupool.memory.StreamFence;

import java.lang.foreign.MemorySegment;

/**
 * A stream that runs nothing, for the dry run that records a forward's allocations (addresses from
 * {@link AllocationRecorder} are never dereferenced). Reports the device and ordinal of the stream it
 * stands in for.
 */
final class DryRunStream implements DeviceStream {

    private final DeviceStream standIn;

    DryRunStream(DeviceStream standIn) {
        this.standIn = standIn;
    }

    @Override
    public int ordinal() {
        return standIn.ordinal();
    }

    @Override
    public StreamFence recordFence() {
        return StreamFence.completed();
    }

    /** Nothing is ever queued: every mark is passed. */
    @Override
    public boolean synchronizedSince(long mark) {
        return true;
    }

    @Override
    public ComputeDevice device() {
        return standIn.device();
    }

    @Override
    public void copyHostToDevice(MemorySegment source, long deviceAddress, long bytes) {
    }

    @Override
    public void copyDeviceToHost(long deviceAddress, MemorySegment destination, long bytes) {
    }

    @Override
    public void copyDeviceToDevice(long sourceAddress, long destinationAddress, long bytes) {
    }

    @Override
    public void fill(long deviceAddress, byte value, long bytes) {
    }

    @Override
    public void launch(KernelFunction function, int gridX, int gridY, int gridZ, int blockX, int blockY, int blockZ,
                       int sharedMemoryBytes, Object... arguments) {
    }

    @Override
    public void enqueueHostTask(Runnable task) {
    }

    @Override
    public void synchronize() {
    }

    @Override
    public void close() {
    }

    @Override
    public String toString() {
        return "dry run of " + standIn;
    }
}
