package io.gpupool.memory.pool;

import io.gpupool.memory.OutOfDeviceMemoryException;
import io.gpupool.memory.PoolConfig;
import io.gpupool.memory.VirtualMemory;

import java.util.Arrays;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.Supplier;

/**
 * The physical allocations behind {@link MappedGrowth}'s mapped memory, and the ones it unmapped but
 * kept: when mapped growth shrinks here and grows there, the memory moves instead of going back to
 * the driver and coming out again, so a steady load makes no create and no release.
 *
 * <pre>
 *   map(a, 3e)     take 2 kept of size e  [h4 h7]  + create 1  [h9]     cap taken for 1e only
 *                  mapPhysical(a, e, [h4 h7 h9])
 *   unmap(b, 2e)   unmapPhysical(b, e) -&gt; [h2 h5]                       keep while kept bytes + e &lt;= bound
 *                  kept[e] = [.. h2 h5]                                 and reserved &lt;= cap; else release
 *   release(0)     releasePhysical each kept handle                    trim, recovery, close, cap lowered
 *
 *   reserved = mapped + kept (+ chunks of other kinds): kept handles are device memory and obey the cap
 * </pre>
 * Kept handles are grouped by size (a pool uses two: the mapped extent for small chunks, the large extent
 * for large ones); a map takes only handles of its extent size. The bound is
 * {@link PoolConfig#retainedHandleBytes()}; with 0 nothing is kept and the source's plain
 * {@link VirtualMemory#map} and {@link VirtualMemory#unmap} are used, exactly as without this class.
 *
 * <h2>Steps</h2>
 * <ol>
 *   <li>map: pop kept handles of the extent size (monitor), take the cap for the rest
 *       ({@link Reservation#takeCap}, which may throw at the cap: the popped handles go back), create
 *       the rest, map them all with one call. If a create or the map fails, the handles this call
 *       created are released and the popped ones kept again (step 2's rule), and the exception passes
 *       on: the call leaves no handle behind and no cap taken.</li>
 *   <li>unmap: unmap the range, then push its handles while the kept bytes stay within the bound and
 *       the reserved bytes within the cap; the others are released and their bytes leave the cap.</li>
 *   <li>release: pop kept handles (monitor) until the kept bytes are at most the target, release them
 *       and give their bytes back.</li>
 * </ol>
 *
 * <h2>Locking</h2>
 * One monitor ({@code this}) guards the kept stacks and is held only to push or pop: never across a
 * {@link VirtualMemory} call, never while taking another lock. Callers hold no order lock and no
 * owner word (the map runs in {@link Growth#afterTake} on a run the caller already holds). Counters
 * are {@link LongAdder}s and the kept totals atomics, read without the monitor.
 */
final class RetainedHandles {

    private final VirtualMemory memory;
    private final Reservation reservation;
    private final Supplier<PoolConfig> config;
    /**
     * Whether memory is mapped with the physical calls (the bound was not 0 when the pool was built;
     * the bound is not tunable, as a range must be unmapped the way it was mapped).
     */
    private final boolean physical;
    /** Kept handles per size: sizes[i] holds stacks[i][0 .. counts[i]); guarded by this. */
    private long[] sizes = new long[0];
    private long[][] stacks = new long[0][];
    private int[] counts = new int[0];
    private final AtomicLong keptBytes = new AtomicLong();
    private final AtomicLong keptCount = new AtomicLong();
    /** When a kept handle was last taken or kept ({@link System#nanoTime}); for {@link #releaseIdle}. */
    private volatile long lastUsedNanos = System.nanoTime();
    /** When {@link #releaseIdle} last ran (its callers are serialised by the grow lock). */
    private volatile long previousSweepNanos = System.nanoTime();
    final LongAdder creates = new LongAdder();
    final LongAdder releases = new LongAdder();
    /** Handles mapped again from the kept ones instead of created. */
    final LongAdder reuses = new LongAdder();

    RetainedHandles(VirtualMemory memory, Reservation reservation, Supplier<PoolConfig> config) {
        this.memory = memory;
        this.reservation = reservation;
        this.config = config;
        this.physical = config.get().retainedHandleBytes() > 0;
    }

    /**
     * Backs {@code [address, address + bytes)} (reserved, not mapped) with memory in physical
     * allocations of {@code extentBytes} each, taking the cap for what is not kept already (step 1).
     *
     * @throws OutOfDeviceMemoryException at the cap or when the device refuses; nothing stays behind
     */
    void map(long address, long bytes, long extentBytes) {
        if (!physical) {
            reservation.takeCap(bytes);
            try {
                memory.map(address, bytes, extentBytes);
            } catch (RuntimeException e) {
                reservation.giveBack(bytes);
                throw e;
            }
            creates.add(bytes / extentBytes);
            return;
        }
        int n = (int) (bytes / extentBytes);
        long[] handles = new long[n];
        int reused = take(extentBytes, handles, n);
        long fresh = (n - reused) * extentBytes;
        try {
            reservation.takeCap(fresh);
        } catch (OutOfDeviceMemoryException atCap) {
            keep(extentBytes, handles, 0, reused);
            throw atCap;
        }
        int made = reused;
        try {
            for (; made < n; made++) {
                handles[made] = memory.createPhysical(extentBytes);
                creates.increment();
            }
            memory.mapPhysical(address, extentBytes, handles, n);
        } catch (RuntimeException e) {
            for (int i = reused; i < made; i++) {
                releaseQuietly(handles[i], e);
            }
            reservation.giveBack(fresh);
            keep(extentBytes, handles, 0, reused);
            throw e;
        }
        reuses.add(reused);
    }

    /**
     * Unmaps {@code [address, address + bytes)}, mapped by {@link #map} in extents of
     * {@code extentBytes}, keeping what the bound allows (step 2).
     *
     * @return bytes released (that left the reservation)
     */
    long unmap(long address, long bytes, long extentBytes) {
        if (!physical) {
            memory.unmap(address, bytes);
            reservation.giveBack(bytes);
            releases.add(bytes / extentBytes);
            return bytes;
        }
        int n = (int) (bytes / extentBytes);
        long[] handles = new long[n];
        memory.unmapPhysical(address, extentBytes, handles, n);
        return (n - keep(extentBytes, handles, 0, n)) * extentBytes;
    }

    /** Releases kept handles until at most {@code keepBytes} are kept (step 3). @return bytes released */
    long release(long keepBytes) {
        long released = 0;
        long[] one = new long[1];
        while (keptBytes.get() > keepBytes) {
            long size = popAny(one);
            if (size == 0) {
                break;
            }
            released += releaseNow(one[0], size);
        }
        return released;
    }

    /**
     * Releases every kept handle once none was taken or kept since the previous call and for at least
     * {@code ageNanos} (so a handle kept just now survives one maintenance round). @return bytes released
     */
    long releaseIdle(long nowNanos, long ageNanos) {
        long used = lastUsedNanos;
        boolean idle = used <= previousSweepNanos && nowNanos - used >= ageNanos;
        previousSweepNanos = System.nanoTime();
        return idle ? release(0) : 0;
    }

    long keptBytes() {
        return keptBytes.get();
    }

    long keptCount() {
        return keptCount.get();
    }

    // ------------------------------------------------------------------ the kept stacks

    /** Pops up to {@code max} kept handles of {@code size} into {@code out}; returns how many. */
    private synchronized int take(long size, long[] out, int max) {
        int i = indexOf(size);
        if (i < 0 || counts[i] == 0) {
            return 0;
        }
        int n = Math.min(max, counts[i]);
        counts[i] -= n;
        System.arraycopy(stacks[i], counts[i], out, 0, n);
        keptBytes.addAndGet(-n * size);
        keptCount.addAndGet(-n);
        lastUsedNanos = System.nanoTime();
        return n;
    }

    /**
     * Keeps {@code handles[from .. from + n)} (all of {@code size}) within the bound and the cap and
     * releases the others. @return how many were kept
     */
    private int keep(long size, long[] handles, int from, int n) {
        int kept = push(size, handles, from, n);
        for (int i = from + kept; i < from + n; i++) {
            releaseNow(handles[i], size);
        }
        return kept;
    }

    private synchronized int push(long size, long[] handles, int from, int n) {
        long bound = config.get().retainedHandleBytes();
        boolean overCap = reservation.reserved() > reservation.capBytes();
        int room = overCap ? 0 : (int) Math.min(n, Math.max(0, (bound - keptBytes.get()) / size));
        if (room == 0) {
            return 0;
        }
        int i = indexOf(size);
        if (i < 0) {
            i = sizes.length;
            sizes = Arrays.copyOf(sizes, i + 1);
            stacks = Arrays.copyOf(stacks, i + 1);
            counts = Arrays.copyOf(counts, i + 1);
            sizes[i] = size;
            stacks[i] = new long[8];
        }
        if (counts[i] + room > stacks[i].length) {
            stacks[i] = Arrays.copyOf(stacks[i], Math.max(2 * stacks[i].length, counts[i] + room));
        }
        System.arraycopy(handles, from, stacks[i], counts[i], room);
        counts[i] += room;
        keptBytes.addAndGet(room * size);
        keptCount.addAndGet(room);
        lastUsedNanos = System.nanoTime();
        return room;
    }

    /** Pops one kept handle of any size into {@code out[0]}; returns its size, or 0 when none is kept. */
    private synchronized long popAny(long[] out) {
        for (int i = 0; i < sizes.length; i++) {
            if (counts[i] > 0) {
                out[0] = stacks[i][--counts[i]];
                keptBytes.addAndGet(-sizes[i]);
                keptCount.decrementAndGet();
                return sizes[i];
            }
        }
        return 0;
    }

    private int indexOf(long size) {
        for (int i = 0; i < sizes.length; i++) {
            if (sizes[i] == size) {
                return i;
            }
        }
        return -1;
    }

    private long releaseNow(long handle, long size) {
        memory.releasePhysical(handle);
        reservation.giveBack(size);
        releases.increment();
        return size;
    }

    private void releaseQuietly(long handle, RuntimeException failure) {
        try {
            memory.releasePhysical(handle);
            releases.increment();
        } catch (RuntimeException e) {
            failure.addSuppressed(e);
        }
    }
}
