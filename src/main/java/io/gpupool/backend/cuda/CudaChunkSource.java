package io.gpupool.backend.cuda;

import io.gpupool.memory.ChunkSource;
import io.gpupool.memory.OutOfDeviceMemoryException;
import io.gpupool.memory.VirtualMemory;

import java.util.Optional;
import java.util.Map;
import java.util.concurrent.ConcurrentSkipListMap;
import java.util.concurrent.atomic.AtomicLong;

import static jcuda.driver.JCudaDriver.cuDeviceGetAttribute;
import static jcuda.driver.JCudaDriver.cuMemAlloc;
import static jcuda.driver.JCudaDriver.cuMemFree;

/**
 * The CUDA device's chunk source: plain chunks through cuMemAlloc / cuMemFree (never managed memory),
 * and, where the device supports virtual memory management, reserved address space backed granule by
 * granule (the optional half of {@link ChunkSource}).
 *
 * <h2>Plain chunks</h2>
 * cuMemAlloc returns 256-byte (in practice 2 MiB for large sizes) aligned addresses. Frees are
 * synchronous, which the {@link ChunkSource} stream rules allow.
 *
 * <h2>Mapping</h2>
 * Notation: {@code G} = mapping granularity (cuMemGetAllocationGranularity, 2 MiB on Hopper); a
 * granule is one {@code G}-aligned, {@code G}-sized piece of a reserved range. Every mapped granule is
 * backed by its own physical allocation (one cuMemCreate of {@code G} bytes), so that the pool can later
 * unmap any granule-aligned sub-range, whatever map calls created it:
 * <pre>
 *   reservation R: base .. base + n*G        handles[i] = CUmemGenericAllocationHandle of granule i, 0 = unmapped
 *
 *   granule     0    1    2    3    4    5    6    7
 *             +----+----+----+----+----+----+----+----+
 *   handles   | h0 | h1 | h2 | 0  | 0  | h5 | 0  | 0  |     map(base, 3G) made h0..h2, map(base + 5G, G) made h5
 *             +----+----+----+----+----+----+----+----+
 *   unmap(base + G, G)  ->  h1 unmapped and released; h0 and h2 stay mapped
 * </pre>
 * The reservations sit in a skip-list map by base address; an address is resolved with
 * {@code floorEntry} (no lock). Each reservation's {@code handles} array is guarded by the reservation
 * itself; {@link #map} and {@link #unmap} hold it across their driver calls (calls on different
 * reservations proceed in parallel), the physical calls below only around their bookkeeping.
 *
 * <p>Cost on the H200 (driver 580, VmmCostBench, docs/benchmarks.md): map ≈ 45 µs and unmap ≈ 35 µs per
 * granule, of which cuMemSetAccess ≈ 28 µs, cuMemCreate ≈ 13 µs, cuMemUnmap ≈ 18 µs, cuMemRelease ≈ 14 µs;
 * cuMemMap itself ≈ 1 µs. A 128 MiB map is therefore ≈ 3 ms: the pool must keep map/unmap off the
 * request path (slack, batching), not call it per block.
 *
 * <p>Map {@code [a, a + k*G)}:
 * <ol>
 *   <li>Resolve the reservation; check alignment and that all {@code k} granules are unmapped.</li>
 *   <li>For each granule: cuMemCreate({@code G}) then cuMemMap at its address; record the handle.</li>
 *   <li>One cuMemSetAccess (read/write for this device) over the whole {@code k*G} range.</li>
 *   <li>On any failure, unmap and release every granule this call created (nothing stays mapped) and
 *       rethrow; CUDA_ERROR_OUT_OF_MEMORY becomes {@link OutOfDeviceMemoryException}.</li>
 * </ol>
 * With {@link #map(long, long, long) extents} of {@code e} granules, step 2 makes one allocation of
 * {@code e*G} per extent ({@code extents[i]} = e at its first granule, its handle in all {@code e} slots).
 * The driver's cost is per allocation, not per byte, so the pool maps large runs in extents of several granules.
 * Unmap {@code [a, a + k*G)}: check all {@code k} granules are mapped and the range splits no extent;
 * cuMemUnmap (one call over the range, or one per extent, see {@link #unmapWholeRange}); cuMemRelease
 * each extent's handle, which frees the physical memory; clear the slots. Release of a reservation requires that nothing in it is mapped,
 * then cuMemAddressFree.
 *
 * <h2>Physical allocations</h2>
 * The pool keeps memory it unmapped and maps it elsewhere later ({@link VirtualMemory}'s physical
 * calls): {@link #createPhysical} and {@link #releasePhysical} are cuMemCreate and cuMemRelease and
 * touch no reservation; {@link #mapPhysical} and {@link #unmapPhysical} do steps 1-4 and the unmap
 * above with the caller's handles, and call the driver outside the reservation's monitor. They claim
 * the granules under it first ({@code extents[i] = -e}: in flight, every other call on those granules
 * is refused), call the driver, and publish or withdraw under it again, so that a slow map does not
 * hold up maps and unmaps of other ranges of the same reservation.
 *
 * <h2>Stream rules</h2>
 * cuMemCreate, cuMemMap, cuMemSetAccess and cuMemUnmap are host calls, not stream-ordered. Memory
 * mapped by {@link #map} may be used by any work enqueued after it returns. The caller of {@link #unmap}
 * and {@link #releaseAddressSpace} guarantees that no queued or running work uses the range (the pool
 * waits for its fences first), exactly as for {@link #free}. Measured on the H200 with a 90 ms kernel
 * running on another stream: map, unmap, reserve and release of unrelated memory return in 0.1–3 ms
 * and leave the kernel running (they do not wait for the device), whereas cuMemFree waits for the
 * kernel to finish (docs/benchmarks.md, "Virtual memory mapping costs on the H200"). Unmapping is
 * therefore the way to give memory back without stalling other streams.
 */
public final class CudaChunkSource implements ChunkSource, VirtualMemory {

    /** CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED. */
    static final int ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED = 102;

    /** A reserved range and the physical handle behind each of its granules (0 = unmapped). */
    private static final class Reservation {
        final long base;
        final long bytes;
        final long[] handles;
        /** At the first granule of each mapped extent: its length in granules (negated while a physical call is in flight); 0 elsewhere. */
        final int[] extents;
        boolean released;

        Reservation(long base, long bytes, int granules) {
            this.base = base;
            this.bytes = bytes;
            this.handles = new long[granules];
            this.extents = new int[granules];
        }
    }

    private final CudaDevice device;
    /** The FFM binding; null when the device cannot map (then {@link #noMappingReason} says why). */
    private final LibCuda lib;
    private final long granularity;
    private final int granuleShift;
    private final String noMappingReason;
    private final ConcurrentSkipListMap<Long, Reservation> reservations = new ConcurrentSkipListMap<>();
    /** Bytes currently mapped; updated under a reservation's lock, read without any. */
    private final AtomicLong mappedBytes = new AtomicLong();
    /**
     * true: one cuMemUnmap over the whole range, covering several granule mappings; false (default): one
     * cuMemUnmap per granule. Both work on the H200 (driver 580) and cost the same there (about 35 µs per
     * granule with the release, VmmCostBench); per granule is the default because the driver documents
     * cuMemUnmap for whole mapped ranges only. Package-private so that the benchmark and tests compare both.
     */
    volatile boolean unmapWholeRange = false;
    /**
     * true: one cuMemSetAccess per granule; false (default): one over the whole mapped range. The H200
     * charges cuMemSetAccess per mapping it covers (about 28 µs each), so one call saves only the call
     * overhead (~2 %). Package-private, for VmmCostBench and the tests.
     */
    volatile boolean accessPerGranule = false;

    CudaChunkSource(CudaDevice device) {
        this.device = device;
        LibCuda binding = null;
        long granule = 0;
        String reason = null;
        try {
            int[] supported = new int[1];
            Cu.check("cuDeviceGetAttribute", cuDeviceGetAttribute(supported,
                    ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, device.handle()), device.label());
            if (supported[0] == 0) {
                reason = "the device does not support virtual memory management";
            } else {
                binding = LibCuda.get();
                device.makeCurrent();
                granule = binding.allocationGranularity(device.index());
                if (granule <= 0 || Long.bitCount(granule) != 1) {
                    reason = "the driver reports a mapping granularity of " + granule + " bytes (not a power of two)";
                }
            }
        } catch (RuntimeException | LinkageError e) {
            reason = "the virtual memory calls of libcuda.so.1 are unavailable (" + e.getMessage() + ")";
        }
        boolean ok = reason == null;
        this.lib = ok ? binding : null;
        this.granularity = ok ? granule : 0;
        this.granuleShift = ok ? Long.numberOfTrailingZeros(granule) : 0;
        this.noMappingReason = reason;
    }

    @Override
    public long allocate(long bytes) {
        if (bytes <= 0) {
            throw new IllegalArgumentException("chunk size must be > 0 bytes, got " + bytes);
        }
        device.makeCurrent();
        Cu.DevicePtr pointer = new Cu.DevicePtr();
        Cu.checkAlloc("cuMemAlloc", cuMemAlloc(pointer, bytes), bytes, name());
        return pointer.address();
    }

    @Override
    public void free(long address, long bytes) {
        device.makeCurrent();
        Cu.check("cuMemFree", cuMemFree(Cu.device(address)), bytes + " bytes at 0x" + Long.toHexString(address));
    }

    @Override
    public long capacityBytes() {
        return device.totalMemory();
    }

    @Override
    public String name() {
        return device.label();
    }

    @Override
    public Optional<VirtualMemory> virtualMemory() {
        return lib != null ? Optional.of(this) : Optional.empty();
    }

    @Override
    public long granularity() {
        requireMapping();
        return granularity;
    }

    /** Bytes currently backed by physical memory through {@link #map} (not counting plain chunks). */
    public long mappedBytes() {
        return mappedBytes.get();
    }

    @Override
    public long reserveAddressSpace(long bytes) {
        requireMapping();
        if (bytes <= 0 || (bytes & (granularity - 1)) != 0) {
            throw new IllegalArgumentException(name() + ": address space must be reserved in positive multiples of "
                    + granularity + " bytes, got " + bytes);
        }
        long granules = bytes >>> granuleShift;
        if (granules > Integer.MAX_VALUE - 8) {
            throw new IllegalArgumentException(name() + ": cannot reserve " + bytes + " bytes in one range (at most "
                    + ((long) (Integer.MAX_VALUE - 8) << granuleShift) + ")");
        }
        device.makeCurrent();
        long base = lib.addressReserve(bytes, granularity);
        reservations.put(base, new Reservation(base, bytes, (int) granules));
        return base;
    }

    @Override
    public void releaseAddressSpace(long address, long bytes) {
        requireMapping();
        Reservation r = reservations.get(address);
        if (r == null || r.bytes != bytes) {
            throw new IllegalArgumentException(name() + ": release of 0x" + Long.toHexString(address) + " (" + bytes
                    + " bytes) matches no reserved range" + (r == null ? "" : " (it has " + r.bytes + " bytes)"));
        }
        synchronized (r) {
            if (r.released) {
                throw new IllegalArgumentException(name() + ": range 0x" + Long.toHexString(address) + " was already released");
            }
            int stillMapped = 0;
            for (long handle : r.handles) {
                if (handle != 0) {
                    stillMapped++;
                }
            }
            if (stillMapped > 0) {
                throw new IllegalStateException(name() + ": cannot release range 0x" + Long.toHexString(address) + " ("
                        + bytes + " bytes): " + stillMapped + " granules of " + granularity + " bytes are still mapped");
            }
            device.makeCurrent();
            lib.addressFree(address, bytes);
            r.released = true;
            reservations.remove(address);
        }
    }

    @Override
    public void map(long address, long bytes) {
        map(address, bytes, granularity);
    }

    /**
     * Maps in extents of {@code extentBytes}: one physical allocation (cuMemCreate + cuMemMap) per
     * extent, one cuMemSetAccess for the range. The driver's cost is per allocation, so an extent of
     * many granules costs about what one 2 MiB granule does; {@link #unmap} then takes whole extents only.
     */
    @Override
    public void map(long address, long bytes, long extentBytes) {
        Reservation r = reservationOf(address, bytes, "map");
        if (extentBytes <= 0 || (extentBytes & (granularity - 1)) != 0 || bytes % extentBytes != 0) {
            throw new IllegalArgumentException(name() + ": map of " + bytes + " bytes in extents of " + extentBytes
                    + " bytes: the extent must be a positive multiple of " + granularity + " bytes dividing the size");
        }
        int extent = (int) (extentBytes >>> granuleShift);
        synchronized (r) {
            requireOpen(r, address, "map");
            int first = (int) ((address - r.base) >>> granuleShift);
            int count = (int) (bytes >>> granuleShift);
            for (int i = first; i < first + count; i++) {
                if (r.handles[i] != 0) {
                    throw new IllegalArgumentException(name() + ": map of 0x" + Long.toHexString(address) + " (" + bytes
                            + " bytes): the granule at 0x" + Long.toHexString(granuleAddress(r, i)) + " is already mapped");
                }
            }
            device.makeCurrent();
            int index = device.index();
            int done = 0;
            long pending = 0;
            try {
                // 2. one physical allocation per extent, mapped at its place
                for (; done < count; done += extent) {
                    pending = lib.create(extentBytes, index);
                    lib.map(granuleAddress(r, first + done), extentBytes, pending);
                    java.util.Arrays.fill(r.handles, first + done, first + done + extent, pending);
                    r.extents[first + done] = extent;
                    pending = 0;
                    if (accessPerGranule) {
                        lib.setAccessReadWrite(granuleAddress(r, first + done), extentBytes, index);
                    }
                }
                // 3. one access change for the whole range
                if (!accessPerGranule) {
                    lib.setAccessReadWrite(address, bytes, index);
                }
            } catch (RuntimeException e) {
                // 4. nothing stays mapped: undo this call's granules, newest first
                if (pending != 0) {
                    releaseQuietly(pending, e);
                }
                for (int i = first + done - extent; i >= first; i -= extent) {
                    long handle = r.handles[i];
                    java.util.Arrays.fill(r.handles, i, i + extent, 0L);
                    r.extents[i] = 0;
                    int result = lib.tryUnmap(granuleAddress(r, i), extentBytes);
                    if (result != 0) {
                        e.addSuppressed(new CudaDriverException("cuMemUnmap", result, "rolling back extent 0x"
                                + Long.toHexString(granuleAddress(r, i))));
                    }
                    releaseQuietly(handle, e);
                }
                if (e instanceof OutOfDeviceMemoryException) {
                    throw new OutOfDeviceMemoryException(bytes, name() + ": map of " + bytes + " bytes at 0x"
                            + Long.toHexString(address) + " failed at granule " + (done + 1) + " of " + count
                            + ": cuMemCreate of " + extentBytes + " bytes: CUDA_ERROR_OUT_OF_MEMORY ("
                            + mappedBytes.get() + " bytes stay mapped by " + name() + ")", e);
                }
                throw e;
            }
            mappedBytes.addAndGet(bytes);
        }
    }

    /**
     * Unmaps whole extents (each mapped by one physical allocation) covering exactly the range; a
     * range that would split an extent is refused before anything changes.
     */
    @Override
    public void unmap(long address, long bytes) {
        Reservation r = reservationOf(address, bytes, "unmap");
        synchronized (r) {
            requireOpen(r, address, "unmap");
            int first = (int) ((address - r.base) >>> granuleShift);
            int count = (int) (bytes >>> granuleShift);
            for (int i = first; i < first + count; ) {
                if (r.handles[i] == 0) {
                    throw new IllegalArgumentException(name() + ": unmap of 0x" + Long.toHexString(address) + " (" + bytes
                            + " bytes): the granule at 0x" + Long.toHexString(granuleAddress(r, i)) + " is not mapped");
                }
                int extent = r.extents[i];
                if (extent <= 0 || i + extent > first + count) {
                    throw new IllegalArgumentException(name() + ": unmap of 0x" + Long.toHexString(address) + " (" + bytes
                            + " bytes) would split the extent mapped around 0x" + Long.toHexString(granuleAddress(r, i))
                            + "; extents are unmapped whole");
                }
                i += extent;
            }
            device.makeCurrent();
            if (unmapWholeRange) {
                lib.unmap(address, bytes);
            }
            for (int i = first; i < first + count; ) {
                int extent = r.extents[i];
                long handle = r.handles[i];
                long extentBytes = (long) extent << granuleShift;
                if (!unmapWholeRange) {
                    lib.unmap(granuleAddress(r, i), extentBytes);
                }
                java.util.Arrays.fill(r.handles, i, i + extent, 0L);
                r.extents[i] = 0;
                mappedBytes.addAndGet(-extentBytes);
                lib.release(handle);
                i += extent;
            }
        }
    }

    @Override
    public long createPhysical(long bytes) {
        requireMapping();
        if (bytes <= 0 || (bytes & (granularity - 1)) != 0) {
            throw new IllegalArgumentException(name() + ": physical allocations are positive multiples of "
                    + granularity + " bytes, got " + bytes);
        }
        device.makeCurrent();
        return lib.create(bytes, device.index());
    }

    @Override
    public void releasePhysical(long handle) {
        requireMapping();
        device.makeCurrent();
        lib.release(handle);
    }

    /**
     * Maps the caller's physical allocations (see "Physical allocations" above): the granules are
     * claimed under the reservation's monitor, the driver is called outside it, and the extents are
     * published under it again; on failure the claim is withdrawn and the handles stay the caller's.
     */
    @Override
    public void mapPhysical(long address, long extentBytes, long[] handles, int count) {
        long bytes = checkExtents(address, extentBytes, count, "mapPhysical");
        Reservation r = reservationOf(address, bytes, "mapPhysical");
        int extent = (int) (extentBytes >>> granuleShift);
        int first = (int) ((address - r.base) >>> granuleShift);
        synchronized (r) {
            requireOpen(r, address, "mapPhysical");
            for (int i = first; i < first + count * extent; i++) {
                if (r.handles[i] != 0) {
                    throw new IllegalArgumentException(name() + ": mapPhysical of 0x" + Long.toHexString(address) + " ("
                            + bytes + " bytes): the granule at 0x" + Long.toHexString(granuleAddress(r, i))
                            + " is mapped or being mapped");
                }
            }
            for (int k = 0; k < count; k++) {                    // claimed: in flight until published
                java.util.Arrays.fill(r.handles, first + k * extent, first + (k + 1) * extent, handles[k]);
                r.extents[first + k * extent] = -extent;
            }
        }
        device.makeCurrent();
        int index = device.index();
        int done = 0;
        try {
            for (; done < count; done++) {
                long at = granuleAddress(r, first + done * extent);
                lib.map(at, extentBytes, handles[done]);
                if (accessPerGranule) {
                    lib.setAccessReadWrite(at, extentBytes, index);
                }
            }
            if (!accessPerGranule) {
                lib.setAccessReadWrite(address, bytes, index);
            }
        } catch (RuntimeException e) {
            for (int k = done - 1; k >= 0; k--) {
                long at = granuleAddress(r, first + k * extent);
                int result = lib.tryUnmap(at, extentBytes);
                if (result != 0) {
                    e.addSuppressed(new CudaDriverException("cuMemUnmap", result, "rolling back extent 0x"
                            + Long.toHexString(at)));
                }
            }
            synchronized (r) {
                java.util.Arrays.fill(r.handles, first, first + count * extent, 0L);
                for (int k = 0; k < count; k++) {
                    r.extents[first + k * extent] = 0;
                }
            }
            throw e;
        }
        synchronized (r) {
            for (int k = 0; k < count; k++) {
                r.extents[first + k * extent] = extent;
            }
        }
        mappedBytes.addAndGet(bytes);
    }

    /**
     * Unmaps extents without releasing them: claimed under the reservation's monitor, cuMemUnmap
     * outside it, the slots cleared under it again.
     */
    @Override
    public void unmapPhysical(long address, long extentBytes, long[] handles, int count) {
        long bytes = checkExtents(address, extentBytes, count, "unmapPhysical");
        Reservation r = reservationOf(address, bytes, "unmapPhysical");
        int extent = (int) (extentBytes >>> granuleShift);
        int first = (int) ((address - r.base) >>> granuleShift);
        synchronized (r) {
            requireOpen(r, address, "unmapPhysical");
            for (int k = 0; k < count; k++) {
                int i = first + k * extent;
                if (r.handles[i] == 0 || r.extents[i] != extent) {
                    throw new IllegalArgumentException(name() + ": unmapPhysical of 0x" + Long.toHexString(address) + " ("
                            + bytes + " bytes): the granule at 0x" + Long.toHexString(granuleAddress(r, i))
                            + " does not start a mapped extent of " + extentBytes + " bytes");
                }
            }
            for (int k = 0; k < count; k++) {
                int i = first + k * extent;
                handles[k] = r.handles[i];
                r.extents[i] = -extent;                          // in flight: no other call touches it
            }
        }
        device.makeCurrent();
        int done = 0;
        try {
            if (unmapWholeRange) {
                lib.unmap(address, bytes);
                done = count;
            }
            for (; done < count; done++) {
                lib.unmap(granuleAddress(r, first + done * extent), extentBytes);
            }
        } finally {
            synchronized (r) {                                   // unmapped extents cleared, the rest mapped again
                for (int k = 0; k < count; k++) {
                    int i = first + k * extent;
                    if (k < done) {
                        java.util.Arrays.fill(r.handles, i, i + extent, 0L);
                        r.extents[i] = 0;
                    } else {
                        r.extents[i] = extent;
                    }
                }
            }
            mappedBytes.addAndGet(-((long) done * extentBytes));
        }
    }

    private long checkExtents(long address, long extentBytes, int count, String operation) {
        requireMapping();
        if (extentBytes <= 0 || (extentBytes & (granularity - 1)) != 0 || count <= 0) {
            throw new IllegalArgumentException(name() + ": " + operation + " of " + count + " extents of " + extentBytes
                    + " bytes at 0x" + Long.toHexString(address) + ": extents are positive multiples of " + granularity
                    + " bytes, at least one");
        }
        return count * extentBytes;
    }

    /** Unmaps and releases everything still mapped and gives every reserved range back (device close). */
    void releaseAll() {
        if (lib == null) {
            return;
        }
        device.makeCurrent();
        for (Map.Entry<Long, Reservation> entry : reservations.entrySet()) {
            Reservation r = entry.getValue();
            synchronized (r) {
                if (r.released) {
                    continue;
                }
                for (int i = 0; i < r.handles.length; i++) {
                    int extent = r.extents[i];
                    if (extent > 0) {
                        long extentBytes = (long) extent << granuleShift;
                        lib.unmap(granuleAddress(r, i), extentBytes);
                        lib.release(r.handles[i]);
                        java.util.Arrays.fill(r.handles, i, i + extent, 0L);
                        r.extents[i] = 0;
                        mappedBytes.addAndGet(-extentBytes);
                    }
                }
                lib.addressFree(r.base, r.bytes);
                r.released = true;
            }
        }
        reservations.clear();
    }

    private Reservation reservationOf(long address, long bytes, String operation) {
        requireMapping();
        if (bytes <= 0 || ((address | bytes) & (granularity - 1)) != 0) {
            throw new IllegalArgumentException(name() + ": " + operation + " of 0x" + Long.toHexString(address) + " ("
                    + bytes + " bytes): address and size must be positive multiples of " + granularity + " bytes");
        }
        Map.Entry<Long, Reservation> entry = reservations.floorEntry(address);
        if (entry == null || address + bytes > entry.getValue().base + entry.getValue().bytes) {
            throw new IllegalArgumentException(name() + ": " + operation + " of 0x" + Long.toHexString(address) + " ("
                    + bytes + " bytes) is not inside one reserved range");
        }
        return entry.getValue();
    }

    private void requireOpen(Reservation r, long address, String operation) {
        if (r.released) {
            throw new IllegalArgumentException(name() + ": " + operation + " of 0x" + Long.toHexString(address)
                    + ": its reserved range was released");
        }
    }

    private void requireMapping() {
        if (lib == null) {
            throw new UnsupportedOperationException(name() + " cannot map memory: " + noMappingReason);
        }
    }

    private long granuleAddress(Reservation r, int index) {
        return r.base + ((long) index << granuleShift);
    }

    private void releaseQuietly(long handle, RuntimeException failure) {
        try {
            lib.release(handle);
        } catch (RuntimeException e) {
            failure.addSuppressed(e);
        }
    }
}
