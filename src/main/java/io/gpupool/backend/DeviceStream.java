package io.gpupool.backend;

import io.gpupool.memory.AllocationStream;

import java.lang.foreign.MemorySegment;

/**
 * An ordered queue of device work. Every method enqueues and returns without waiting unless it says
 * otherwise; work runs in the order it was enqueued. A stream is used by one request at a time
 * (it is leased), so callers need no locking.
 *
 * <p>Host memory passed to the copy methods must stay valid until the copy has run, i.e. until
 * {@link #synchronize()} returns or a later host task runs.
 */
public interface DeviceStream extends AllocationStream, AutoCloseable {

    /** The device this stream belongs to. */
    ComputeDevice device();

    void copyHostToDevice(MemorySegment source, long deviceAddress, long bytes);

    void copyDeviceToHost(long deviceAddress, MemorySegment destination, long bytes);

    void copyDeviceToDevice(long sourceAddress, long destinationAddress, long bytes);

    /** Sets {@code bytes} bytes at {@code deviceAddress} to {@code value}. */
    void fill(long deviceAddress, byte value, long bytes);

    /**
     * Launches {@code function} with the given grid and block sizes. {@code arguments} are
     * {@link Long} (device pointers and 64-bit integers), {@link Integer} and {@link Float}, in the
     * order of the kernel's parameters.
     */
    void launch(KernelFunction function, int gridX, int gridY, int gridZ, int blockX, int blockY, int blockZ,
                int sharedMemoryBytes, Object... arguments);

    /** Runs {@code task} on a host thread after all work enqueued before it has finished. */
    void enqueueHostTask(Runnable task);

    /** Blocks until all enqueued work has finished; rethrows the first failure of that work. */
    void synchronize();

    /** Destroys the stream after finishing its work. */
    @Override
    void close();
}
