package io.gpupool.memory;

/**
 * Address space without memory behind it, backed piecewise later: what a {@link ChunkSource} that
 * maps offers through {@link ChunkSource#virtualMemory()} (CUDA's virtual memory management:
 * cuMemAddressReserve, cuMemCreate + cuMemMap; mmap on a Linux host).
 *
 * <pre>
 *   reserveAddressSpace(4 GiB)   |..........................................................|  no memory
 *   map(a, 6 MiB)                |   [###]                                                  |  6 MiB used
 *   map(b, 2 MiB)                |   [###]          [#]                                     |  8 MiB used
 *   unmap(a + 2 MiB, 2 MiB)      |   [#] [#]        [#]                                     |  6 MiB used
 * </pre>
 * The pool lays its buddy chunks out in reserved address space and maps only the granules that hold
 * blocks, so free space between live blocks costs address space, not device memory (see
 * {@link GrowthPolicy#MAPPED}).
 *
 * <h2>Rules</h2>
 * Ranges passed to {@link #map} and {@link #unmap} are multiples of {@link #granularity()} inside one
 * reserved range; {@code unmap} may cover several earlier {@code map} calls or part of one. Stream
 * rules as for chunks: mapped memory is referenced by no queued work, and the caller of {@code unmap}
 * and {@code releaseAddressSpace} guarantees that no work still uses the range. Safe to call from
 * several threads; the pool calls it outside its order locks. Decorators of a source wrap its
 * virtual memory too, applying their concern to mapped bytes.
 */
public interface VirtualMemory {

    /** The unit of mapping in bytes (2 MiB on current GPUs); a power of two dividing the pool's minimum block. */
    long granularity();

    /**
     * Reserves {@code bytes} (a multiple of the granularity) of address space with no memory behind it.
     *
     * @throws OutOfDeviceMemoryException when no address space is left
     */
    long reserveAddressSpace(long bytes);

    /** Returns a range obtained from {@link #reserveAddressSpace}; nothing in it may still be mapped. */
    void releaseAddressSpace(long address, long bytes);

    /**
     * Backs {@code [address, address + bytes)}, which is reserved and not mapped, with device memory
     * readable and writable by this device.
     *
     * @throws OutOfDeviceMemoryException when the device (or a limit) has no memory for it; nothing stays mapped
     */
    void map(long address, long bytes);

    /**
     * Like {@link #map(long, long)}, backing the range with physical allocations of {@code extentBytes}
     * each (a multiple of the granularity dividing {@code bytes}); the caller then unmaps only whole
     * extents. A driver charges map and unmap per physical allocation whatever its size, so large
     * tensors are cheaper to map in large extents. The default ignores the extent.
     */
    default void map(long address, long bytes, long extentBytes) {
        map(address, bytes);
    }

    /** Removes the memory behind {@code [address, address + bytes)}, all of it mapped; the addresses stay reserved. */
    void unmap(long address, long bytes);
}
