package io.gpupool.backend.cuda;

import io.gpupool.memory.ChunkSource;
import io.gpupool.memory.OutOfDeviceMemoryException;

import java.util.Map;
import java.util.TreeMap;

/**
 * "Expandable segments": one large reserved range of device virtual addresses, backed by physical
 * memory only where the pool has asked for chunks, so that chunks from successive growth steps sit
 * next to each other and the pool above can merge blocks across them.
 *
 * <pre>
 *   base                                                                     base + reserved
 *   |== chunk 1 ==|======= chunk 2 =======|== chunk 3 ==|      (unmapped, costs nothing)      |
 *   ^ mapped in granules (2 MiB on Hopper) as the pool grows; freed chunks leave holes that the
 *     next allocate fills first (lowest address first), so the mapped part stays dense.
 * </pre>
 *
 * Allocate, for {@code bytes} (a multiple of the granularity):
 * <ol>
 *   <li>Under the lock, find the lowest gap between mapped regions that holds {@code bytes}
 *       (first fit by address); none → {@link OutOfDeviceMemoryException} (range exhausted).</li>
 *   <li>cuMemCreate one physical allocation of {@code bytes}; cuMemMap it at the gap; cuMemSetAccess
 *       read/write for this device. Each step is rolled back if a later one fails.</li>
 *   <li>Record the region (address → size, physical handle).</li>
 * </ol>
 * Free unmaps the region and releases its physical memory; the address range stays reserved until
 * {@link #close()}. The driver calls go through {@link LibCuda} (FFM) because JCuda's cuMemCreate is
 * broken. The lock is held across the driver calls; growth is rare (the pool caches chunks).
 */
public final class ExpandableChunkSource implements ChunkSource, AutoCloseable {

    private record Region(long size, long handle) {
    }

    private final CudaDevice device;
    private final LibCuda lib;
    private final long granularity;
    private final long base;
    private final long reserved;
    private final TreeMap<Long, Region> regions = new TreeMap<>();
    private boolean closed;

    ExpandableChunkSource(CudaDevice device, LibCuda lib, long reserveBytes) {
        this.device = device;
        this.lib = lib;
        device.makeCurrent();
        this.granularity = lib.allocationGranularity(device.index());
        this.reserved = roundUp(reserveBytes, granularity);
        this.base = lib.addressReserve(reserved, granularity);
    }

    /** Mapping granularity (bytes); every chunk size must be a multiple of it. */
    public long granularity() {
        return granularity;
    }

    /** First address of the reserved range. */
    public long base() {
        return base;
    }

    /** Size of the reserved range. */
    public long reservedBytes() {
        return reserved;
    }

    /** Bytes currently backed by physical memory. */
    public synchronized long mappedBytes() {
        long total = 0;
        for (Region region : regions.values()) {
            total += region.size();
        }
        return total;
    }

    @Override
    public synchronized long allocate(long bytes) {
        if (bytes <= 0 || bytes % granularity != 0) {
            throw new IllegalArgumentException(name() + ": chunk size must be a positive multiple of "
                    + granularity + " bytes, got " + bytes);
        }
        if (closed) {
            throw new IllegalStateException(name() + " is closed");
        }
        long address = findGap(bytes);
        if (address < 0) {
            throw new OutOfDeviceMemoryException(bytes, name() + ": no gap of " + bytes + " bytes left in the "
                    + reserved + "-byte reserved range (" + mappedBytes() + " bytes mapped)");
        }
        device.makeCurrent();
        long handle = lib.create(bytes, device.index());
        try {
            lib.mapReadWrite(address, bytes, handle, device.index());
        } catch (RuntimeException e) {
            lib.release(handle);
            throw e;
        }
        regions.put(address, new Region(bytes, handle));
        return address;
    }

    @Override
    public synchronized void free(long address, long bytes) {
        Region region = regions.get(address);
        if (region == null || region.size() != bytes) {
            throw new IllegalArgumentException(name() + ": free of 0x" + Long.toHexString(address) + " (" + bytes
                    + " bytes) matches no mapped chunk" + (region == null ? "" : " (it has " + region.size() + " bytes)"));
        }
        device.makeCurrent();
        lib.unmap(address, bytes);
        lib.release(region.handle());
        regions.remove(address);
    }

    @Override
    public long capacityBytes() {
        return Math.min(reserved, device.totalMemory());
    }

    @Override
    public String name() {
        return device.label() + " expandable";
    }

    /** Unmaps whatever is still mapped and gives the address range back. Idempotent. */
    @Override
    public synchronized void close() {
        if (closed) {
            return;
        }
        closed = true;
        device.makeCurrent();
        for (Map.Entry<Long, Region> entry : regions.entrySet()) {
            lib.unmap(entry.getKey(), entry.getValue().size());
            lib.release(entry.getValue().handle());
        }
        regions.clear();
        lib.addressFree(base, reserved);
    }

    private long findGap(long bytes) {
        long cursor = base;
        for (Map.Entry<Long, Region> entry : regions.entrySet()) {
            if (entry.getKey() - cursor >= bytes) {
                return cursor;
            }
            cursor = entry.getKey() + entry.getValue().size();
        }
        return base + reserved - cursor >= bytes ? cursor : -1;
    }

    private static long roundUp(long value, long multiple) {
        return (value + multiple - 1) / multiple * multiple;
    }
}
