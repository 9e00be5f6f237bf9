package io.gpupool.memory;

import java.util.concurrent.atomic.AtomicLong;

/** A chunk obtained from the {@link ChunkSource}: either buddy space or one dedicated large block. */
final class Chunk {

    final int id;
    final long address;
    final long bytes;
    /** Size in minimum blocks (buddy chunks only). */
    final long units;
    final boolean dedicated;
    /** Minimum blocks of this chunk outside the global free lists; changed under the order lock that moved them. */
    final AtomicLong liveUnits = new AtomicLong();
    /** When {@link #liveUnits} last reached 0 ({@link System#nanoTime()}). */
    volatile long emptySinceNanos;
    final FenceSet fences = new FenceSet();
    /** A dedicated chunk whose block was freed and that waits in the pool's large cache. */
    volatile boolean idleDedicated;

    Chunk(int id, long address, long bytes, long units, boolean dedicated) {
        this.id = id;
        this.address = address;
        this.bytes = bytes;
        this.units = units;
        this.dedicated = dedicated;
        this.emptySinceNanos = System.nanoTime();
    }
}
