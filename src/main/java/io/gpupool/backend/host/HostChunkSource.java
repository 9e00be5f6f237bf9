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
 */
public final class HostChunkSource implements ChunkSource {

    private static final long ALIGNMENT = 4096;

    private record Chunk(Arena arena, long bytes) { }

    private final String name;
    private final HostMemoryBudget budget;
    private final ConcurrentHashMap<Long, Chunk> chunks = new ConcurrentHashMap<>();

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

    /** Number of chunks currently allocated (for tests and leak checks). */
    public int outstandingChunks() {
        return chunks.size();
    }
}
