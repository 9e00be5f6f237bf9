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
    /**
     * MAPPED growth: which units have device memory behind them (bit u of word u / 64), or null
     * for a chunk that is memory throughout. Guarded by itself; a unit's bit changes only while
     * its owner (an allocating thread, or the reclaimer that took the block out of the free lists)
     * holds it exclusively, the monitor only protects the other bits of the word.
     */
    final long[] mapped;
    /**
     * MAPPED growth: this address-space chunk serves runs of at least {@link BuddyLevel#largeUnits}
     * units (and spans), the others serve smaller runs; see {@link BuddyLevel}, "Large and small chunks".
     */
    volatile boolean large;
    /**
     * MAPPED growth: units per physical allocation. 1 in small chunks; in large chunks an extent of
     * several units is mapped and unmapped as a whole (all its units or none are mapped), because the
     * driver charges per physical allocation. Set before the chunk is published.
     */
    volatile int extentUnits = 1;
    /** Serialises check-and-map of extents in a large chunk (two runs may touch one extent); never held with the grow lock taken after. */
    final Object extentLock = new Object();
    /** Units with their bit set in {@link #mapped}; guarded by {@code mapped}. */
    volatile long mappedUnits;

    Chunk(int id, long address, long bytes, long units, boolean dedicated) {
        this(id, address, bytes, units, dedicated, false);
    }

    Chunk(int id, long address, long bytes, long units, boolean dedicated, boolean addressSpaceOnly) {
        this.id = id;
        this.address = address;
        this.bytes = bytes;
        this.units = units;
        this.dedicated = dedicated;
        this.emptySinceNanos = System.nanoTime();
        this.mapped = addressSpaceOnly ? new long[(int) ((units + 63) >>> 6)] : null;
    }

    /** Whether this chunk is address space whose units are mapped one by one (MAPPED growth). */
    boolean isAddressSpace() {
        return mapped != null;
    }

    /** The first unit in [from, to) whose mapped bit equals {@code state}, or {@code to}. Caller holds {@code mapped}. */
    long nextUnit(long from, long to, boolean state) {
        for (long u = from; u < to; u++) {
            long word = mapped[(int) (u >>> 6)];
            if (!state) {
                word = ~word;
            }
            word &= -1L << (u & 63);
            if (word == 0) {
                u |= 63;                                           // skip the rest of this word
                continue;
            }
            long found = (u & ~63L) + Long.numberOfTrailingZeros(word);
            return Math.min(found, to);
        }
        return to;
    }

    /** Mapped units in [from, to). Caller holds {@code mapped}. */
    long countMapped(long from, long to) {
        long count = 0;
        for (long u = from; u < to; u++) {
            if ((u & 63) == 0 && u + 64 <= to) {
                count += Long.bitCount(mapped[(int) (u >>> 6)]);
                u += 63;
            } else if ((mapped[(int) (u >>> 6)] & (1L << (u & 63))) != 0) {
                count++;
            }
        }
        return count;
    }

    /** Sets or clears the mapped bits of [from, to) and adjusts {@link #mappedUnits}. Caller holds {@code mapped}. */
    void markMapped(long from, long to, boolean state) {
        for (long u = from; u < to; u++) {
            long bit = 1L << (u & 63);
            int w = (int) (u >>> 6);
            boolean was = (mapped[w] & bit) != 0;
            if (was != state) {
                mapped[w] ^= bit;
                mappedUnits += state ? 1 : -1;
            }
        }
    }
}
