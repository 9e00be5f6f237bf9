package io.gpupool.memory.pool;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * Chunks by id. Reads are one volatile array load (lock-free); adding and removing copy the array
 * under the table's monitor, which happens only when the pool grows or releases.
 */
final class ChunkTable {

    private volatile Chunk[] chunks = new Chunk[16];

    Chunk get(int id) {
        return chunks[id];
    }

    /** Registers a chunk under the lowest free id, built by {@code factory} with that id. */
    synchronized Chunk add(java.util.function.IntFunction<Chunk> factory) {
        Chunk[] current = chunks;
        int id = 0;
        while (id < current.length && current[id] != null) {
            id++;
        }
        if (id >= Handles.MAX_CHUNKS) {
            throw new IllegalStateException("more than " + Handles.MAX_CHUNKS + " chunks");
        }
        Chunk[] next = Arrays.copyOf(current, id < current.length ? current.length : current.length * 2);
        Chunk chunk = factory.apply(id);
        next[id] = chunk;
        chunks = next;
        return chunk;
    }

    synchronized void remove(Chunk chunk) {
        Chunk[] next = chunks.clone();
        next[chunk.id] = null;
        chunks = next;
    }

    List<Chunk> all() {
        List<Chunk> result = new ArrayList<>();
        for (Chunk chunk : chunks) {
            if (chunk != null) {
                result.add(chunk);
            }
        }
        return result;
    }
}
