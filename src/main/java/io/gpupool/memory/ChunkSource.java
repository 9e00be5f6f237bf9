package io.gpupool.memory;

/**
 * Where the pool gets large chunks of device memory from, and where it gives them back.
 *
 * <p>This is the whole upstream contract of the pool: a backend (CUDA, host) implements it once,
 * and each cross-cutting concern (limits, statistics, fault injection, trace recording) is a
 * decorator that wraps another {@code ChunkSource} and undoes its own bookkeeping when the
 * upstream throws.
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
 * <h2>Optional: address space and mapping (virtual memory)</h2>
 * A source that can reserve addresses without memory and back them piecewise later (CUDA's virtual
 * memory management: cuMemAddressReserve, cuMemCreate + cuMemMap) says so with
 * {@link #supportsMapping()}. The pool then lays its buddy chunks out in reserved address space and
 * maps only the granules that hold blocks, so free space between live blocks costs address space,
 * not device memory (see {@link GrowthPolicy#MAPPED}).
 * <pre>
 *   reserveAddressSpace(4 GiB)   |..........................................................|  no memory
 *   map(a, 6 MiB)                |   [###]                                                  |  6 MiB used
 *   map(b, 2 MiB)                |   [###]          [#]                                     |  8 MiB used
 *   unmap(a + 2 MiB, 2 MiB)      |   [#] [#]        [#]                                     |  6 MiB used
 * </pre>
 * Ranges passed to {@link #map} and {@link #unmap} are multiples of {@link #mappingGranularity()}
 * inside one reserved range; {@code unmap} may cover several earlier {@code map} calls or part of
 * one. Stream rules as for chunks: mapped memory is referenced by no queued work, and the caller of
 * {@code unmap} and {@code releaseAddressSpace} guarantees that no work still uses the range.
 * Decorators forward these calls, applying their concern to mapped bytes.
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

    /** Whether {@link #reserveAddressSpace}, {@link #map}, {@link #unmap} and {@link #releaseAddressSpace} work. */
    default boolean supportsMapping() {
        return false;
    }

    /** The unit of mapping in bytes (2 MiB on current GPUs); a power of two dividing the pool's minimum block. */
    default long mappingGranularity() {
        throw new UnsupportedOperationException(name() + " cannot map memory into reserved address space");
    }

    /**
     * Reserves {@code bytes} (a multiple of the granularity) of address space with no memory behind it.
     *
     * @throws OutOfDeviceMemoryException when no address space is left
     */
    default long reserveAddressSpace(long bytes) {
        throw new UnsupportedOperationException(name() + " cannot reserve address space");
    }

    /** Returns a range obtained from {@link #reserveAddressSpace}; nothing in it may still be mapped. */
    default void releaseAddressSpace(long address, long bytes) {
        throw new UnsupportedOperationException(name() + " cannot reserve address space");
    }

    /**
     * Backs {@code [address, address + bytes)}, which is reserved and not mapped, with device memory
     * readable and writable by this device.
     *
     * @throws OutOfDeviceMemoryException when the device (or a limit) has no memory for it; nothing stays mapped
     */
    default void map(long address, long bytes) {
        throw new UnsupportedOperationException(name() + " cannot map memory");
    }

    /**
     * Like {@link #map(long, long)}, backing the range with physical allocations of {@code extentBytes}
     * each (a multiple of the granularity dividing {@code bytes}); the caller then unmaps only whole
     * extents. A driver charges map and unmap per physical allocation (about 80 us each on the
     * H200, whatever its size), so large tensors are cheaper to map in large extents. The default
     * ignores the extent.
     */
    default void map(long address, long bytes, long extentBytes) {
        map(address, bytes);
    }

    /** Removes the memory behind {@code [address, address + bytes)}, all of it mapped; the addresses stay reserved. */
    default void unmap(long address, long bytes) {
        throw new UnsupportedOperationException(name() + " cannot map memory");
    }
}
