package io.gpupool.replay;

import io.gpupool.memory.source.PhysicalAllocations;
import io.gpupool.memory.source.ReservedRanges;

import io.gpupool.memory.ChunkSource;
import io.gpupool.memory.OutOfDeviceMemoryException;
import io.gpupool.memory.VirtualMemory;

import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;

/**
 * A {@link ChunkSource} that hands out address ranges with no memory behind them.
 *
 * <p>For trace replay, fragmentation studies and benchmarks of the pool's bookkeeping: the
 * allocators never touch the memory they manage, so a made-up address space measures them exactly,
 * without a device and without the cost of real allocations. Never give its addresses to code that
 * reads or writes memory.
 *
 * <pre>
 *   BASE = 2^40                next (bump pointer, only grows)
 *   |-- chunk --|-- chunk --|--...--|----------------------------------&gt;
 * </pre>
 * Addresses are 2 MiB aligned and never reused, so chunks never overlap even across free and
 * reallocate. The capacity is enforced like a device's memory (fetch-add, roll back on refusal);
 * {@link #free} checks that the address and size match a live chunk and fails loudly otherwise.
 *
 * <p>Created with {@link #withMapping}, it also simulates virtual memory: address ranges reserved
 * from the same bump pointer cost nothing, and {@link #map} / {@link #unmap} count granules
 * (2 MiB) against the capacity. A bitmap per reserved range checks every call: mapping a granule
 * twice, unmapping one that is not mapped, or releasing a range that still has mapped granules
 * fails loudly, so a pool bug shows up in replay rather than as silent double counting.
 */
public final class SimulatedChunkSource implements ChunkSource, VirtualMemory {

    private static final long BASE = 1L << 40;
    private static final long ALIGNMENT = 2L << 20;

    private final String name;
    private final long capacityBytes;
    private final AtomicLong next = new AtomicLong(BASE);
    private final AtomicLong reserved = new AtomicLong();
    private final ConcurrentHashMap<Long, Long> live = new ConcurrentHashMap<>();
    private final boolean mapping;
    /** Reserved ranges and their mapped granules, with the misuse checks. */
    private final ReservedRanges reservations;
    private final AtomicLong mapCalls = new AtomicLong();
    private final AtomicLong unmapCalls = new AtomicLong();
    private final AtomicLong createCalls = new AtomicLong();
    private final AtomicLong releaseCalls = new AtomicLong();
    private final PhysicalAllocations physical;
    private final AtomicLong addressSpace = new AtomicLong();

    /** Extents larger than a granule, by first address: their size; guarded by itself. */
    private final java.util.TreeMap<Long, Long> extents = new java.util.TreeMap<>();

    public SimulatedChunkSource(String name, long capacityBytes) {
        this(name, capacityBytes, false);
    }

    /** A simulated device that also supports address-space reservation and mapping in 2 MiB granules. */
    public static SimulatedChunkSource withMapping(String name, long capacityBytes) {
        return new SimulatedChunkSource(name, capacityBytes, true);
    }

    private SimulatedChunkSource(String name, long capacityBytes, boolean mapping) {
        this.mapping = mapping;
        if (capacityBytes <= 0) {
            throw new IllegalArgumentException("capacityBytes must be positive, got " + capacityBytes);
        }
        this.name = name;
        this.capacityBytes = capacityBytes;
        this.reservations = new ReservedRanges(name, ALIGNMENT);
        this.physical = new PhysicalAllocations(name);
    }

    @Override
    public long allocate(long bytes) {
        if (bytes <= 0) {
            throw new IllegalArgumentException("chunk size must be positive, got " + bytes);
        }
        long after = reserved.addAndGet(bytes);
        if (after > capacityBytes || after < 0) {
            reserved.addAndGet(-bytes);
            throw new OutOfDeviceMemoryException(bytes, name + " cannot provide " + bytes + " bytes: "
                    + (after - bytes) + " of " + capacityBytes + " reserved");
        }
        long span = (bytes + ALIGNMENT - 1) & -ALIGNMENT;
        long address = next.getAndAdd(span);
        live.put(address, bytes);
        return address;
    }

    @Override
    public void free(long address, long bytes) {
        Long size = live.get(address);
        if (size == null) {
            throw new IllegalArgumentException(name + ": free of 0x" + Long.toHexString(address)
                    + " which is not a live chunk");
        }
        if (size != bytes) {
            throw new IllegalArgumentException(name + ": free of 0x" + Long.toHexString(address) + " with "
                    + bytes + " bytes, but the chunk has " + size);
        }
        if (live.remove(address, size)) {
            reserved.addAndGet(-bytes);
        } else {
            throw new IllegalArgumentException(name + ": concurrent double free of 0x" + Long.toHexString(address));
        }
    }

    @Override
    public long capacityBytes() {
        return capacityBytes;
    }

    @Override
    public String name() {
        return name;
    }

    /** Bytes in live chunks. */
    public long reservedBytes() {
        return reserved.get();
    }

    /** Number of live chunks. */
    public int liveChunks() {
        return live.size();
    }

    @Override
    public Optional<VirtualMemory> virtualMemory() {
        return mapping ? Optional.of(this) : Optional.empty();
    }

    @Override
    public long granularity() {
        requireMapping();
        return ALIGNMENT;
    }

    @Override
    public long reserveAddressSpace(long bytes) {
        requireMapping();
        reservations.requireGranules("reserveAddressSpace", 0, bytes);
        long address = next.getAndAdd(bytes);
        reservations.add(address, bytes);
        addressSpace.addAndGet(bytes);
        return address;
    }

    @Override
    public void releaseAddressSpace(long address, long bytes) {
        requireMapping();
        reservations.remove(address, bytes);
        addressSpace.addAndGet(-bytes);
    }

    /** Records extents so that an unmap that would split one fails, as it would on a device. */
    @Override
    public void map(long address, long bytes, long extentBytes) {
        if (extentBytes <= 0 || extentBytes % ALIGNMENT != 0 || bytes % extentBytes != 0) {
            throw new IllegalArgumentException(name + ": map of " + bytes + " bytes in extents of " + extentBytes
                    + " bytes: not a multiple of the granularity dividing the size");
        }
        map(address, bytes);
        if (extentBytes > ALIGNMENT) {
            synchronized (extents) {
                for (long a = address; a < address + bytes; a += extentBytes) {
                    extents.put(a, extentBytes);
                }
            }
        }
    }

    @Override
    public void map(long address, long bytes) {
        requireMapping();
        reservations.requireGranules("map", address, bytes);
        long after = reserved.addAndGet(bytes);
        if (after > capacityBytes || after < 0) {
            reserved.addAndGet(-bytes);
            throw new OutOfDeviceMemoryException(bytes, name + " cannot map " + bytes + " bytes: "
                    + (after - bytes) + " of " + capacityBytes + " in use");
        }
        try {
            reservations.markMapped(address, bytes);
        } catch (RuntimeException e) {
            reserved.addAndGet(-bytes);
            throw e;
        }
        mapCalls.incrementAndGet();
    }

    @Override
    public void unmap(long address, long bytes) {
        requireMapping();
        reservations.requireGranules("unmap", address, bytes);
        synchronized (extents) {
            var before = extents.floorEntry(address);
            var last = extents.floorEntry(address + bytes - 1);
            if ((before != null && before.getKey() < address && before.getKey() + before.getValue() > address)
                    || (last != null && last.getKey() + last.getValue() > address + bytes)) {
                throw new IllegalStateException(name + ": unmap of 0x" + Long.toHexString(address) + " (" + bytes
                        + " bytes) would split an extent");
            }
            reservations.markUnmapped(address, bytes);
            extents.subMap(address, address + bytes).clear();
        }
        reserved.addAndGet(-bytes);
        unmapCalls.incrementAndGet();
    }

    /** Counts against the capacity: a physical allocation is memory even while mapped nowhere. */
    @Override
    public long createPhysical(long bytes) {
        requireMapping();
        reservations.requireGranules("createPhysical", 0, bytes);
        long after = reserved.addAndGet(bytes);
        if (after > capacityBytes || after < 0) {
            reserved.addAndGet(-bytes);
            throw new OutOfDeviceMemoryException(bytes, name + " cannot create " + bytes + " bytes: "
                    + (after - bytes) + " of " + capacityBytes + " in use");
        }
        createCalls.incrementAndGet();
        return physical.create(bytes);
    }

    @Override
    public void releasePhysical(long handle) {
        requireMapping();
        reserved.addAndGet(-physical.release(handle));
        releaseCalls.incrementAndGet();
    }

    @Override
    public void mapPhysical(long address, long extentBytes, long[] handles, int count) {
        requireMapping();
        reservations.requireGranules("mapPhysical", address, extentBytes);
        physical.map(address, extentBytes, handles, count);
        try {
            reservations.markMapped(address, count * extentBytes);
        } catch (RuntimeException e) {
            physical.unmap(address, extentBytes, new long[count], count);
            throw e;
        }
        mapCalls.incrementAndGet();
    }

    @Override
    public void unmapPhysical(long address, long extentBytes, long[] handles, int count) {
        requireMapping();
        physical.unmap(address, extentBytes, handles, count);
        reservations.markUnmapped(address, count * extentBytes);
        unmapCalls.incrementAndGet();
    }

    /** {@link #createPhysical} calls that succeeded so far. */
    public long createCalls() {
        return createCalls.get();
    }

    /** {@link #releasePhysical} calls so far. */
    public long releaseCalls() {
        return releaseCalls.get();
    }

    /** Successful {@link #map} and {@link #mapPhysical} calls so far. */
    public long mapCalls() {
        return mapCalls.get();
    }

    /** {@link #unmap} and {@link #unmapPhysical} calls so far. */
    public long unmapCalls() {
        return unmapCalls.get();
    }

    /** Bytes of address space reserved now (mapped or not). */
    public long addressSpaceBytes() {
        return addressSpace.get();
    }

    private void requireMapping() {
        if (!mapping) {
            throw new UnsupportedOperationException(name + " was created without mapping (use withMapping)");
        }
    }
}
