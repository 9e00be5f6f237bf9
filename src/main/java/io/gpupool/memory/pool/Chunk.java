package io.gpupool.memory.pool;

import io.gpupool.memory.AllocationStream;
import io.gpupool.memory.ChunkSource;

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
    /** {@link #emptySinceNanos} of a buddy chunk that became empty after maintenance last looked at it. */
    static final long EMPTY_UNSTAMPED = Long.MIN_VALUE;
    /**
     * When {@link #liveUnits} last reached 0 ({@link System#nanoTime()}). For a buddy chunk, as maintenance saw it:
     * the free that empties it writes {@link #EMPTY_UNSTAMPED} (no clock read on the free path, and no store while
     * it is unstamped already) and the next look ({@link Recovery#releaseEmptyChunks}) stamps it with its own time,
     * so the chunk is kept at most one maintenance period longer than its idle age, never released earlier.
     */
    volatile long emptySinceNanos;
    /**
     * Fences of memory that left a stream for the global level: one set per unit of a buddy chunk,
     * one for all of a dedicated chunk. Per unit rather than per chunk, so that a stream taking a run
     * waits only for the streams that last freed those very units, and a reclaim can unmap the free
     * units whose fences completed while other units of the chunk are still in flight. A run's units
     * belong to whoever holds the run; their sets change only while it does (taking a run moves the
     * fences out, giving it back puts the new fence in), and {@link #fenceLock} covers the readers
     * that merely look ({@link #fencesBlock}, {@link #fencesPending}).
     */
    private final FenceSet[] fences;
    /**
     * Guards every unit set of this chunk, so that an operation on a run takes one lock, not one per
     * unit; a leaf below the order locks, never nested with the mapping monitor, above the monitors of
     * slab and gathering sets ({@link FenceSet}). Never held while waiting for a fence ({@link #awaitFences}).
     */
    private final Object fenceLock = new Object();
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
     * MAPPED growth: units per physical allocation ({@link io.gpupool.memory.PoolConfig#mappedExtentBytes()}
     * in small chunks, 16 MiB in large ones); an extent of several units is mapped and unmapped as a whole
     * (all its units or none are mapped), because the driver charges per physical allocation. Set before
     * the chunk is published.
     */
    volatile int extentUnits = 1;
    /**
     * MAPPED growth, chunks of several units per extent: the extents (bit at an extent's first unit) that a thread is mapping
     * now, outside every lock; two runs may share an end extent, and the second waits on
     * {@link #mapped} until it is mapped. Null for a chunk that is memory throughout; guarded by {@code mapped}.
     */
    final long[] mapping;
    /** Units with their bit set in {@link #mapped}; guarded by {@code mapped}. */
    volatile long mappedUnits;
    /** MAPPED growth: how recently each free block's memory was freed ({@link FreeStamps#NONE} outside address space). */
    final FreeStamps freeStamps;

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
        this.mapping = addressSpaceOnly ? new long[(int) ((units + 63) >>> 6)] : null;
        this.freeStamps = addressSpaceOnly ? new FreeStamps(units) : FreeStamps.NONE;
        this.fences = new FenceSet[dedicated ? 1 : (int) Math.max(1, units)];
        for (int i = 0; i < fences.length; i++) {
            fences[i] = new FenceSet(fenceLock);
        }
    }

    // Fence slots of [first, first + count): the units themselves, or slot 0 of a dedicated chunk.
    private int firstSlot(long first) {
        return dedicated ? 0 : (int) first;
    }

    private int endSlot(long first, long count) {
        return dedicated ? 1 : (int) (first + count);
    }

    /** Records {@code fence} (a stream's work on the memory that just left it) on units [first, first + count). */
    void addFence(long first, long count, FenceSet.Shared fence) {
        int from = firstSlot(first);
        int end = endSlot(first, count);
        synchronized (fenceLock) {
            int missing = 0;                                   // units that do not hold this very fence yet (a
            for (int u = from; u < end; u++) {                 // stream freeing again under one lazy fence: none)
                if (!fences[u].holdsLocked(fence)) {
                    missing++;
                }
            }
            if (missing == 0) {
                return;
            }
            fence.retain(missing);                             // one atomic for the run, not one per unit
            for (int u = from; u < end; u++) {
                FenceSet unit = fences[u];
                if (!unit.holdsLocked(fence)) {
                    unit.addRetainedLocked(fence);
                }
            }
        }
    }

    /**
     * The first unit set in slots [from, end) that holds a fence, or {@code end}: read without the lock,
     * so a range with no fence (the common case while the device keeps up) costs no lock at all.
     */
    private int firstFenced(int from, int end) {
        int u = from;
        while (u < end && fences[u].isEmpty()) {
            u++;
        }
        return u;
    }

    /**
     * Moves the fences of units [first, first + count) into {@code into} (created when needed; the
     * latest per stream is kept) and returns it, or null when none were pending. Caller holds the run.
     */
    FenceSet takeFences(long first, long count, FenceSet into) {
        return takeFences(first, count, into, -1);
    }

    /**
     * {@link #takeFences(long, long, FenceSet)}, except that a unit whose only fence is stream {@code own}'s
     * keeps it (-1: none): the taker is that stream, which needs no wait for its own work, so the fence would
     * be gathered only to be cleared. It stays on the unit while the stream holds the run; when the run comes
     * back under the same lazy fence the unit already holds it ({@link #addFence} adds nothing), under a newer
     * one it is replaced, and once it completed the next look drops it. A stream taking back what it freed
     * thus touches no reference count at all. Not for a new slab's run (its fences move to the slab).
     */
    FenceSet takeFences(long first, long count, FenceSet into, int own) {
        int end = endSlot(first, count);
        int start = firstFenced(firstSlot(first), end);
        if (start == end) {
            return into;
        }
        FenceSet.Shared owed = null;                           // the units' references to drop, in one go
        int owedCount = 0;
        synchronized (fenceLock) {
            for (int u = start; u < end; u++) {
                FenceSet unit = fences[u];
                if (!unit.isEmpty()) {
                    if (own >= 0 && unit.holdsOnlyLocked(own)) {
                        continue;                              // stays: see the method comment
                    }
                    if (into == null) {
                        into = new FenceSet();
                    }
                    FenceSet.Shared dropped = into.gatherLocked(unit);
                    if (dropped != null && dropped != owed && owedCount > 0) {
                        owed.release(owedCount);
                        owedCount = 0;
                    }
                    if (dropped != null) {
                        owed = dropped;
                        owedCount++;
                    }
                }
            }
        }
        if (owedCount > 0) {
            owed.release(owedCount);
        }
        return into;
    }

    /** Puts a reference to each of {@code from}'s fences on units [first, first + count) (a slab's run coming back). */
    void putFences(long first, long count, FenceSet from) {
        if (from.isEmpty()) {
            return;
        }
        synchronized (fenceLock) {
            for (int u = firstSlot(first), end = endSlot(first, count); u < end; u++) {
                fences[u].copyFrom(from);
            }
        }
    }

    /** Whether taking units [first, first + count) would make {@code stream} wait on another stream's unfinished work. */
    boolean fencesBlock(long first, long count, AllocationStream stream) {
        int end = endSlot(first, count);
        int start = firstFenced(firstSlot(first), end);
        if (start == end) {
            return false;
        }
        FenceSet.Scan scan = count > 1 ? new FenceSet.Scan() : null;     // one unit: nothing to share
        synchronized (fenceLock) {
            for (int u = start; u < end; u++) {
                if (fences[u].blocks(stream, scan)) {
                    return true;
                }
            }
        }
        return false;
    }

    /**
     * Whether units [first, first + count) carry no unfinished fence of another stream and at least
     * one of {@code stream}'s own: memory the stream freed itself, reusable by it without a wait.
     */
    boolean heldOnlyBy(long first, long count, AllocationStream stream) {
        int end = endSlot(first, count);
        int start = firstFenced(firstSlot(first), end);
        if (start == end) {
            return false;
        }
        if (onlyOwnHint(start, end, stream.ordinal())) {
            return true;                                           // the common case: no lock, no driver query
        }
        boolean own = false;
        FenceSet.Scan scan = count > 1 ? new FenceSet.Scan() : null;     // one unit: nothing to share
        synchronized (fenceLock) {
            for (int u = start; u < end; u++) {
                FenceSet set = fences[u];
                if (set.heldOnlyBy(stream, scan)) {
                    own = true;
                } else if (set.blocks(stream, scan)) {
                    return false;
                }
            }
        }
        return own;
    }

    /** Without the lock, as a hint: every unit in slots [start, end) holds nothing but stream {@code ordinal}'s fence. */
    private boolean onlyOwnHint(int start, int end, int ordinal) {
        for (int u = start; u < end; u++) {
            if (!fences[u].onlyOwnHint(ordinal)) {
                return false;
            }
        }
        return true;
    }

    /** Whether any fence of units [first, first + count) is unfinished (completed ones are dropped). */
    boolean fencesPending(long first, long count) {
        int end = endSlot(first, count);
        int start = firstFenced(firstSlot(first), end);
        if (start == end) {
            return false;
        }
        FenceSet.Scan scan = count > 1 ? new FenceSet.Scan() : null;     // one unit: nothing to share
        synchronized (fenceLock) {
            for (int u = start; u < end; u++) {
                if (fences[u].pending(scan)) {
                    return true;
                }
            }
        }
        return false;
    }

    /** Blocks until the fences of units [first, first + count) completed (before their memory is unmapped or freed). */
    void awaitFences(long first, long count) {
        for (int u = firstSlot(first), end = endSlot(first, count); u < end; u++) {
            fences[u].awaitAll();
        }
    }

    /** Blocks until every fence of the chunk completed. */
    void awaitAllFences() {
        awaitFences(0, units);                                 // a dedicated chunk's one slot included
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

    /** Whether unit {@code u} is mapped. Caller holds {@code mapped}. */
    boolean isMapped(long u) {
        return (mapped[(int) (u >>> 6)] & (1L << (u & 63))) != 0;
    }

    /** Whether a thread is mapping the extent that starts at unit {@code u}. Caller holds {@code mapped}. */
    boolean isBeingMapped(long u) {
        return (mapping[(int) (u >>> 6)] & (1L << (u & 63))) != 0;
    }

    /** Claims or gives up the extent that starts at unit {@code u} for mapping. Caller holds {@code mapped}. */
    void markBeingMapped(long u, boolean state) {
        long bit = 1L << (u & 63);
        if (state) {
            mapping[(int) (u >>> 6)] |= bit;
        } else {
            mapping[(int) (u >>> 6)] &= ~bit;
        }
    }

    /**
     * Mapped units in [from, to) of a block whose bits cannot change now: a free block in a chunk of one
     * unit per extent under the order lock of its list, or a run of such a chunk the caller holds. There
     * a unit's bit changes only while its holder has it, and that holder handed
     * the block on through an order lock, so the bits are settled and visible without the monitor;
     * other bits of a word may change meanwhile, but every write keeps these (the monitor orders those
     * writes among themselves). With extents of several units a neighbour run may map an extent it shares with the
     * block, so the count is taken under the monitor.
     */
    long countMappedSettled(long from, long to) {
        if (extentUnits != 1) {
            synchronized (mapped) {
                return countMapped(from, to);
            }
        }
        return countMapped(from, to);
    }

    /** Mapped units in [from, to). Caller holds {@code mapped} (or see {@link #countMappedSettled}), or takes the count as a hint. */
    long countMapped(long from, long to) {
        long count = 0;
        for (long u = from; u < to; ) {
            long wordEnd = Math.min(to, (u | 63) + 1);              // this word's part of the range
            int bits = (int) (wordEnd - u);
            long mask = (bits == 64 ? -1L : (1L << bits) - 1) << (u & 63);
            count += Long.bitCount(mapped[(int) (u >>> 6)] & mask);
            u = wordEnd;
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
