package io.gpupool.backend;

import io.gpupool.memory.metric.AllocatorMode;
import io.gpupool.memory.ChunkSource;
import io.gpupool.memory.DeviceAllocator;

import java.nio.file.Path;
import java.util.Optional;

/** One device: its memory, its streams, its kernels. */
public interface ComputeDevice {

    /** Index of the device within its backend. */
    int index();

    /** Human-readable name, e.g. "NVIDIA H200" or "host". */
    String name();

    /** Total device memory in bytes. */
    long totalMemory();

    /** Free device memory in bytes as the device reports it now. */
    long freeMemory();

    /** Chunks of plain device memory for the pool (never managed memory). */
    ChunkSource chunkSource();

    /**
     * A native allocator that bypasses the pool, for the baseline modes {@link AllocatorMode#DIRECT}
     * and {@link AllocatorMode#CUDA_ASYNC}; empty where the device does not offer that mode.
     */
    Optional<DeviceAllocator> nativeAllocator(AllocatorMode mode);

    /** Creates a stream; {@code ordinal} is its dense index on this device (selects a local cache). */
    DeviceStream createStream(int ordinal);

    /** Loads a kernel module (PTX text on CUDA). Host devices throw {@link UnsupportedOperationException}. */
    KernelModule loadModule(String name, byte[] image);

    /**
     * The vendor matrix-product library of this device (cuBLASLt on CUDA), loaded on the first call from
     * {@code folder} when given, else by the system's library search; empty where the device has none or it cannot
     * be loaded (the reason is logged once).
     */
    default Optional<MatmulLibrary> matmulLibrary(Path folder) {
        return Optional.empty();
    }

    /** Makes this device current for the calling thread (CUDA context); a no-op on the host. */
    void bindToCurrentThread();

    /**
     * Opens a graph capture facility with a stream of its own ({@code streamOrdinal}, outside the
     * request streams' ordinals); empty where the device has no graphs (the host). The caller closes it.
     */
    default Optional<GraphCapture> openGraphCapture(int streamOrdinal) {
        return Optional.empty();
    }
}
