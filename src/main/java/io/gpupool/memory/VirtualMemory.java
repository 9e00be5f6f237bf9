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
 *
 * <h2>Physical allocations</h2>
 * {@link #map} creates the memory it maps and {@link #unmap} releases it. The four physical calls
 * split both in two, so that a caller may keep memory it unmapped and map it elsewhere later, which
 * spares the driver's create and release (cuMemCreate / cuMemRelease):
 * <pre>
 *   h = createPhysical(e)               device memory, mapped nowhere      (cuMemCreate)
 *   mapPhysical(a, e, [h], 1)           [a, a + e) backed by h, read/write (cuMemMap + cuMemSetAccess)
 *   unmapPhysical(a, e, out, 1)         out[0] = h, still device memory    (cuMemUnmap)
 *   mapPhysical(b, e, [h], 1)           the same memory at b, no create
 *   releasePhysical(h)                  memory gone                        (cuMemRelease)
 * </pre>
 * A handle is mapped at one place at a time. A range mapped with {@code map} is unmapped with
 * {@code unmap}, one mapped with {@code mapPhysical} with {@code unmapPhysical}.
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

    /**
     * Creates one physical allocation of {@code bytes} (a positive multiple of the granularity) that is
     * mapped nowhere; it is device memory until {@link #releasePhysical}.
     *
     * @return an opaque, non-zero handle
     * @throws OutOfDeviceMemoryException when the device (or a limit) has no memory for it
     */
    long createPhysical(long bytes);

    /** Frees a physical allocation from {@link #createPhysical} that is mapped nowhere. */
    void releasePhysical(long handle);

    /**
     * Maps {@code handles[0..count)}, each a physical allocation of {@code extentBytes} mapped nowhere,
     * back to back from {@code address} (reserved and not mapped), and makes the range readable and
     * writable by this device. On failure nothing of this call stays mapped and the handles stay the
     * caller's, unreleased.
     *
     * @throws OutOfDeviceMemoryException when the device (or a limit) refuses
     */
    void mapPhysical(long address, long extentBytes, long[] handles, int count);

    /**
     * Unmaps {@code [address, address + count * extentBytes)}, which {@link #mapPhysical} mapped in
     * extents of exactly {@code extentBytes}, and writes the allocations that were behind it to
     * {@code handles[0..count)}, lowest address first. They stay allocated and are the caller's.
     */
    void unmapPhysical(long address, long extentBytes, long[] handles, int count);
}
