package io.gpupool.backend.host;

import io.gpupool.memory.ChunkSource;
import io.gpupool.memory.OutOfDeviceMemoryException;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
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
 * Elsewhere than Linux the source does not map and the pool grows ON_DEMAND.
 */
public final class HostChunkSource implements ChunkSource {

    private static final long ALIGNMENT = 4096;

    private static final long GRANULE = 2L << 20;

    private record Chunk(Arena arena, long bytes) { }

    /** A reserved range and which of its granules are mapped; guarded by itself. */
    private record Reservation(long base, long bytes, java.util.BitSet mapped) { }

    private final String name;
    private final HostMemoryBudget budget;
    private final ConcurrentHashMap<Long, Chunk> chunks = new ConcurrentHashMap<>();
    /** Null where the host cannot map (see the class comment). */
    private final HostVirtualMemory vm = HostVirtualMemory.load();
    private final java.util.concurrent.ConcurrentSkipListMap<Long, Reservation> reservations =
            new java.util.concurrent.ConcurrentSkipListMap<>();
    private final java.util.concurrent.atomic.AtomicLong mappedBytes = new java.util.concurrent.atomic.AtomicLong();

    /** A chunk source with its own budget of {@code capacityBytes}. */
    public HostChunkSource(long capacityBytes) {
        this("host", new HostMemoryBudget(capacityBytes));
    }

    HostChunkSource(String name, HostMemoryBudget budget) {
        this.name = name;
        this.budget = budget;
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
    public boolean supportsMapping() {
        return vm != null;
    }

    @Override
    public long mappingGranularity() {
        requireMapping();
        return GRANULE;
    }

    @Override
    public long reserveAddressSpace(long bytes) {
        requireMapping();
        requireGranules("reserveAddressSpace", 0, bytes);
        long base = vm.reserve(bytes, GRANULE, name);
        reservations.put(base, new Reservation(base, bytes, new java.util.BitSet((int) (bytes / GRANULE))));
        return base;
    }

    @Override
    public void releaseAddressSpace(long address, long bytes) {
        requireMapping();
        Reservation r = reservations.get(address);
        if (r == null || r.bytes() != bytes) {
            throw new IllegalArgumentException(name + ": release of 0x" + Long.toHexString(address) + " (" + bytes
                    + " bytes) matches no reserved range");
        }
        synchronized (r) {
            if (!r.mapped().isEmpty()) {
                throw new IllegalStateException(name + ": cannot release range 0x" + Long.toHexString(address) + ": "
                        + r.mapped().cardinality() + " granule(s) of 2 MiB are still mapped");
            }
            reservations.remove(address);
            vm.release(address, bytes, name);
        }
    }

    @Override
    public void map(long address, long bytes) {
        Reservation r = reservationOf("map", address, bytes);
        synchronized (r) {
            int from = (int) ((address - r.base()) / GRANULE);
            int to = from + (int) (bytes / GRANULE);
            int already = r.mapped().nextSetBit(from);
            if (already >= 0 && already < to) {
                throw new IllegalStateException(name + ": map of 0x" + Long.toHexString(address) + " (" + bytes
                        + " bytes): the granule at 0x" + Long.toHexString(r.base() + already * GRANULE) + " is already mapped");
            }
            budget.reserve(bytes, name);
            try {
                vm.commit(address, bytes, name);
            } catch (RuntimeException e) {
                budget.release(bytes);
                throw e;
            }
            r.mapped().set(from, to);
            mappedBytes.addAndGet(bytes);
        }
    }

    @Override
    public void unmap(long address, long bytes) {
        Reservation r = reservationOf("unmap", address, bytes);
        synchronized (r) {
            int from = (int) ((address - r.base()) / GRANULE);
            int to = from + (int) (bytes / GRANULE);
            int hole = r.mapped().nextClearBit(from);
            if (hole < to) {
                throw new IllegalStateException(name + ": unmap of 0x" + Long.toHexString(address) + " (" + bytes
                        + " bytes): the granule at 0x" + Long.toHexString(r.base() + hole * GRANULE) + " is not mapped");
            }
            vm.decommit(address, bytes, name);
            r.mapped().clear(from, to);
            mappedBytes.addAndGet(-bytes);
            budget.release(bytes);
        }
    }

    /** Bytes mapped into reserved address space now (for tests and leak checks). */
    public long mappedBytes() {
        return mappedBytes.get();
    }

    private Reservation reservationOf(String call, long address, long bytes) {
        requireMapping();
        requireGranules(call, address, bytes);
        var entry = reservations.floorEntry(address);
        if (entry == null || address + bytes > entry.getKey() + entry.getValue().bytes()) {
            throw new IllegalArgumentException(name + ": " + call + " of 0x" + Long.toHexString(address) + " (" + bytes
                    + " bytes) is not inside one reserved range");
        }
        return entry.getValue();
    }

    private void requireGranules(String call, long address, long bytes) {
        if (bytes <= 0 || bytes % GRANULE != 0 || address % GRANULE != 0) {
            throw new IllegalArgumentException(name + ": " + call + " of " + bytes + " bytes at 0x" + Long.toHexString(address)
                    + ": address and size must be positive multiples of 2 MiB");
        }
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
