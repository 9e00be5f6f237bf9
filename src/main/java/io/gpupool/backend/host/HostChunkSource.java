package io.gpupool.backend.host;

import io.gpupool.memory.ChunkSource;
import io.gpupool.memory.OutOfDeviceMemoryException;
import io.gpupool.memory.VirtualMemory;
import io.gpupool.memory.source.PhysicalAllocations;
import io.gpupool.memory.source.ReservedRanges;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Chunks of off-heap memory for the pool on the host backend. Each chunk lives in its own shared
 * {@link Arena}, closed by {@link #free}: memory is returned deterministically, never by the GC.
 * Chunks are 4 KiB (page) aligned, which satisfies the 256-byte rule of {@link ChunkSource}.
 *
 * <h2>Mapping (Linux)</h2>
 * The optional half of {@link ChunkSource} works like the CUDA device's, so the pool's default
 * MAPPED growth behaves the same without a GPU: {@link #reserveAddressSpace} is an {@code mmap} with
 * no access and no swap reservation (it costs no memory), {@link #map} an {@code mprotect} to
 * read/write (the budget is charged; pages are committed on first touch), {@link #unmap} a
 * {@code madvise(MADV_DONTNEED)} that gives the pages back plus an {@code mprotect} to no access
 * (a stray access then faults instead of reading stale data), {@link #releaseAddressSpace} an
 * {@code munmap} (see {@link HostVirtualMemory}). The granularity is 2 MiB, the pool's smallest
 * block. A bitmap per reserved range refuses mapping a granule twice, unmapping one that is not
 * mapped and releasing a range that still has mapped granules, each before any system call.
 * A physical allocation ({@link #createPhysical}) is a charge on the budget with a number; mapping
 * it is the {@code mprotect}, unmapping it the {@code madvise} + {@code mprotect} with the budget
 * still charged, so a handle the pool keeps costs budget, not pages.
 * Elsewhere than Linux the source does not map and the pool grows ON_DEMAND.
 */
public final class HostChunkSource implements ChunkSource, VirtualMemory {

    private static final long ALIGNMENT = 4096;

    private static final long GRANULE = 2L << 20;

    private record Chunk(Arena arena, long bytes) { }

    private final String name;
    private final HostMemoryBudget budget;
    private final ConcurrentHashMap<Long, Chunk> chunks = new ConcurrentHashMap<>();
    /** Null where the host cannot map (see the class comment). */
    private final HostVirtualMemory vm = HostVirtualMemory.load();
    /** Reserved ranges and their mapped granules, with the misuse checks; set up in the constructor. */
    private final ReservedRanges reservations;
    private final java.util.concurrent.atomic.AtomicLong mappedBytes = new java.util.concurrent.atomic.AtomicLong();
    private final PhysicalAllocations physical;

    /** A chunk source with its own budget of {@code capacityBytes}. */
    public HostChunkSource(long capacityBytes) {
        this("host", new HostMemoryBudget(capacityBytes));
    }

    HostChunkSource(String name, HostMemoryBudget budget) {
        this.name = name;
        this.budget = budget;
        this.reservations = new ReservedRanges(name, GRANULE);
        this.physical = new PhysicalAllocations(name);
    }

    @Override
    public long allocate(long bytes) {
        if (bytes <= 0) {
            throw new IllegalArgumentException("chunk size must be > 0 bytes, got " + bytes);
        }
        budget.reserve(bytes, name);
        Arena arena = Arena.ofShared();
        MemorySegment segment;
        try {
            segment = arena.allocate(bytes, ALIGNMENT);
        } catch (OutOfMemoryError | IllegalArgumentException e) {
            arena.close();
            budget.release(bytes);
            throw new OutOfDeviceMemoryException(bytes, name + ": the operating system refused " + bytes + " bytes", e);
        }
        chunks.put(segment.address(), new Chunk(arena, bytes));
        return segment.address();
    }

    @Override
    public void free(long address, long bytes) {
        Chunk chunk = chunks.remove(address);
        if (chunk == null) {
            throw new IllegalArgumentException(name + ": free of unknown chunk 0x" + Long.toHexString(address));
        }
        if (chunk.bytes() != bytes) {
            chunks.put(address, chunk);
            throw new IllegalArgumentException(name + ": chunk 0x" + Long.toHexString(address) + " has "
                    + chunk.bytes() + " bytes, free was given " + bytes);
        }
        chunk.arena().close();
        budget.release(bytes);
    }

    @Override
    public long capacityBytes() {
        return budget.capacity();
    }

    @Override
    public String name() {
        return name;
    }

    @Override
    public Optional<VirtualMemory> virtualMemory() {
        return vm != null ? Optional.of(this) : Optional.empty();
    }

    @Override
    public long granularity() {
        requireMapping();
        return GRANULE;
    }

    @Override
    public long reserveAddressSpace(long bytes) {
        requireMapping();
        reservations.requireGranules("reserveAddressSpace", 0, bytes);
        long base = vm.reserve(bytes, GRANULE, name);
        reservations.add(base, bytes);
        return base;
    }

    @Override
    public void releaseAddressSpace(long address, long bytes) {
        requireMapping();
        reservations.remove(address, bytes);
        vm.release(address, bytes, name);
    }

    @Override
    public void map(long address, long bytes) {
        requireMapping();
        reservations.markMapped(address, bytes);
        try {
            budget.reserve(bytes, name);
            try {
                vm.commit(address, bytes, name);
            } catch (RuntimeException e) {
                budget.release(bytes);
                throw e;
            }
        } catch (RuntimeException e) {
            reservations.markUnmapped(address, bytes);
            throw e;
        }
        mappedBytes.addAndGet(bytes);
    }

    @Override
    public void unmap(long address, long bytes) {
        requireMapping();
        reservations.markUnmapped(address, bytes);
        try {
            vm.decommit(address, bytes, name);
        } catch (RuntimeException e) {
            reservations.markMapped(address, bytes);           // still mapped: the caller may retry
            throw e;
        }
        mappedBytes.addAndGet(-bytes);
        budget.release(bytes);
    }

    /** Charges the budget: a physical allocation is memory even while mapped nowhere. */
    @Override
    public long createPhysical(long bytes) {
        requireMapping();
        reservations.requireGranules("createPhysical", 0, bytes);
        budget.reserve(bytes, name);
        return physical.create(bytes);
    }

    @Override
    public void releasePhysical(long handle) {
        requireMapping();
        budget.release(physical.release(handle));
    }

    /** An {@code mprotect} to read/write over the range; its pages are committed on first touch. */
    @Override
    public void mapPhysical(long address, long extentBytes, long[] handles, int count) {
        requireMapping();
        long bytes = count * extentBytes;
        reservations.requireGranules("mapPhysical", address, extentBytes);
        physical.map(address, extentBytes, handles, count);
        try {
            reservations.markMapped(address, bytes);
            try {
                vm.commit(address, bytes, name);
            } catch (RuntimeException e) {
                reservations.markUnmapped(address, bytes);
                throw e;
            }
        } catch (RuntimeException e) {
            physical.unmap(address, extentBytes, new long[count], count);
            throw e;
        }
        mappedBytes.addAndGet(bytes);
    }

    /** Drops the pages (the budget stays charged to the handles) and makes the range inaccessible. */
    @Override
    public void unmapPhysical(long address, long extentBytes, long[] handles, int count) {
        requireMapping();
        long bytes = count * extentBytes;
        reservations.markUnmapped(address, bytes);
        try {
            vm.decommit(address, bytes, name);
        } catch (RuntimeException e) {
            reservations.markMapped(address, bytes);           // still mapped: the caller may retry
            throw e;
        }
        physical.unmap(address, extentBytes, handles, count);
        mappedBytes.addAndGet(-bytes);
    }

    /** Physical allocations created and not released (for tests and leak checks). */
    public int physicalAllocations() {
        return physical.live();
    }

    /** Bytes mapped into reserved address space now (for tests and leak checks). */
    public long mappedBytes() {
        return mappedBytes.get();
    }

    private void requireMapping() {
        if (vm == null) {
            throw new UnsupportedOperationException(name + " cannot map memory (needs Linux mmap through FFM)");
        }
    }

    /** Number of chunks currently allocated (for tests and leak checks). */
    public int outstandingChunks() {
        return chunks.size();
    }
}
