package io.gpupool.memory;

import java.util.Optional;

/**
 * Where the pool gets large chunks of device memory from, and where it gives them back.
 *
 * <p>This is the whole upstream contract of the pool: a backend (CUDA, host) implements it once.
 * The cap and the pool's counters live in the pool itself; a concern that sits between pool and
 * backend (fault injection in production, statistics for offline replay) is a decorator
 * ({@link io.gpupool.memory.source.ForwardingChunkSource}) that wraps another {@code ChunkSource}
 * and undoes its own bookkeeping when the upstream throws.
 *
 * <h2>Stream rules</h2>
 * Chunks belong to no stream. {@link #allocate} returns memory that no queued device work
 * references. The caller of {@link #free} guarantees that no work on any stream still reads or
 * writes the chunk (the pool synchronises the streams that last used a chunk before it gives the
 * chunk back). Implementations may therefore free immediately and synchronously.
 *
 * <h2>Alignment</h2>
 * Addresses are at least 256-byte aligned; sizes passed in are multiples of 2 MiB chosen by the pool.
 *
 * <h2>Thread safety</h2>
 * Implementations must be safe to call from several threads; the pool calls them outside its locks.
 *
 * <h2>Optional: virtual memory</h2>
 * A source that can reserve address space and map memory into it piecewise returns that capability
 * from {@link #virtualMemory()}; the pool then grows by mapping ({@link GrowthPolicy#MAPPED}).
 */
public interface ChunkSource {

    /**
     * Reserves a chunk of exactly {@code bytes}.
     *
     * @return the chunk's base address (device address, or native address on the host backend)
     * @throws OutOfDeviceMemoryException when the device (or a limit) cannot provide the chunk
     */
    long allocate(long bytes);

    /** Returns a chunk obtained from {@link #allocate} with the same size. */
    void free(long address, long bytes);

    /** Total memory of the device behind this source, used to resolve caps given as a fraction. */
    long capacityBytes();

    /** A short name for messages and metrics, e.g. {@code cuda:0} or {@code host}. */
    String name();

    /** The source's virtual memory, if it can reserve address space and map memory into it; empty by default. */
    default Optional<VirtualMemory> virtualMemory() {
        return Optional.empty();
    }
}
