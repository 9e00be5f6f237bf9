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
 *
 * <h2>Cross-stream reuse of device memory</h2>
 * Device memory freed by work on stream A may still be read or written by A's queued work. Before
 * another stream B touches it, B must be ordered after that work: whoever hands the memory over
 * records {@link #recordFence()} on A and calls {@link io.gpupool.memory.StreamFence#makeWait}
 * with B (a device-side wait on CUDA; the host never blocks). The pool does this for every block
 * that moves between streams. The baselines are safe by construction: {@code DIRECT} frees with
 * cuMemFree, which waits for the device; {@code CUDA_ASYNC} frees on the block's stream and the
 * driver's pool makes a later user on another stream wait for that free. The GPU test
 * {@code CudaBackendGpuTest} checks both protocols against a kernel that is still writing.
 *
 * <h2>Host tasks</h2>
 * A host task runs after all work enqueued before it. On the host backend everything is one queue,
 * so later work also waits for the task; on CUDA, device work enqueued after a host task does not
 * wait for it (host tasks run on a worker thread beside the GPU).
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

    /**
     * Whether this stream is recording a graph now ({@link GraphCapture}): device work enqueued on it is recorded,
     * and any address it uses must outlive the graph. Asked by the stream's current user only.
     */
    default boolean capturing() {
        return false;
    }

    /** Blocks until all enqueued work has finished; rethrows the first failure of that work. */
    void synchronize();

    /**
     * Milliseconds the device spent on what {@code work} enqueues on this stream, measured between two timing
     * events around it; blocks until that work has finished. For choosing between kernels at warm-up, never on a
     * request's path, and never while the stream captures. The default measures host time around a
     * synchronisation (devices without timing events).
     */
    default double timeMillis(Runnable work) {
        synchronize();
        long started = System.nanoTime();
        work.run();
        synchronize();
        return (System.nanoTime() - started) / 1e6;
    }

    /** Destroys the stream after finishing its work. */
    @Override
    void close();
}
