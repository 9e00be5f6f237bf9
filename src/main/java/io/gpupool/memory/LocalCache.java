package io.gpupool.memory;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;

/**
 * One stream's local cache: free buddy runs and small objects by class, used by the owning stream
 * without locks.
 *
 * <h2>Layout</h2>
 * <pre>
 *   class index c:  0 .. S-1            small-object classes (SizeClasses)
 *                   S + n - 1           buddy runs of n minimum blocks, n = 1 .. maxBlock/minBlock
 *   entries[c]      long[64] stack of packed handles, newest on top; counts[c] entries are valid
 * </pre>
 *
 * <h2>Ownership instead of a lock</h2>
 * An {@code owner} word is claimed with one uncontended CAS (0 -&gt; 1) around each operation and
 * released with a plain release store. The owning stream is used by one request at a time, so the
 * claim practically always succeeds; when it does not (a block released from a callback thread
 * while the stream serves the next request) the caller simply goes to the global level instead of
 * waiting. Only maintenance (trim, recovery, detach, idle sweep from another thread) spins for the
 * word, and owners hold it for a few stores. Lock order: owner word, then global order locks / class
 * locks; nothing that holds a global lock ever claims an owner word, and nobody holding an owner
 * word takes the pool's grow lock.
 *
 * <h2>Steps</h2>
 * <ol>
 *   <li>pop: claim, take the top entry of class c (a hit) or count a miss, release.</li>
 *   <li>push: claim; if class c is at its count cap, flush its older half to the global level (one
 *       fence for the batch); if the bytes cap would be passed, flush the oldest entries of the
 *       largest classes until it fits; push; release. A block larger than a quarter of the bytes
 *       cap is not cached (large blocks are rare per request and expensive to strand in one stream).
 *       The bytes cap is {@link DevicePool#localCapBytes}: the configured cap, under ON_DEMAND growth
 *       lowered to the stream's share of a fraction of the pool's allocated bytes (one volatile read).</li>
 *   <li>uses are stamped with the pool's coarse clock (a volatile long refreshed on global-level
 *       operations, maintenance and every 1024 local operations of any stream: no clock call on the
 *       hot path); every 1024 operations the owner flushes classes idle longer than
 *       {@code localIdleAge}.</li>
 * </ol>
 *
 * <h2>Statistics</h2>
 * Single-writer counters: written by the claimant with {@code setOpaque}, read by metrics with
 * {@code getOpaque}, never locked.
 */
final class LocalCache {

    static final int HITS = 0;
    static final int MISSES = 1;
    static final int ALLOC_BYTES = 2;
    static final int ALLOC_REQUESTED = 3;
    static final int FREES = 4;
    static final int FREE_BYTES = 5;
    static final int FREE_REQUESTED = 6;
    static final int CACHED_BYTES = 7;
    static final int CACHED_BLOCKS = 8;
    private static final int STATS = 9;
    private static final int SWEEP_MASK = 1023;
    private static final int RETIRED = 2;

    private static final VarHandle OWNER;
    private static final VarHandle LONGS = MethodHandles.arrayElementVarHandle(long[].class);

    static {
        try {
            OWNER = MethodHandles.lookup().findVarHandle(LocalCache.class, "owner", int.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    final int ordinal;
    final AllocationStream stream;
    private final DevicePool pool;
    private final long[][] entries;
    private final int[] counts;
    private final long[] lastUse;
    private final long[] stats = new long[STATS];
    @SuppressWarnings("unused") // through OWNER
    private volatile int owner;
    private long bytes;
    private int operations;

    LocalCache(DevicePool pool, AllocationStream stream, int classCount) {
        this.pool = pool;
        this.stream = stream;
        this.ordinal = stream.ordinal();
        this.entries = new long[classCount][];
        this.counts = new int[classCount];
        this.lastUse = new long[classCount];
    }

    boolean tryClaim() {
        return OWNER.compareAndSet(this, 0, 1);
    }

    /**
     * Waits for the owner word (maintenance from another thread).
     *
     * @return false if the cache was retired meanwhile (it is empty and must not be touched)
     */
    boolean claim() {
        int spins = 0;
        while (!OWNER.compareAndSet(this, 0, 1)) {
            if ((int) OWNER.getVolatile(this) == RETIRED) {
                return false;
            }
            if (++spins < 64) {
                Thread.onSpinWait();
            } else {
                Thread.yield();
            }
        }
        return true;
    }

    /**
     * Flushes everything and marks the cache retired for good: later claims fail, so a thread still
     * holding a reference goes to the global level.
     */
    void retire() {
        if (!claim()) {
            return;
        }
        flushAllClaimed();
        OWNER.setRelease(this, RETIRED);
    }

    void unclaim() {
        OWNER.setRelease(this, 0);
    }

    long stat(int index) {
        return (long) LONGS.getOpaque(stats, index);
    }

    private void add(int index, long delta) {
        LONGS.setOpaque(stats, index, stats[index] + delta);
    }

    /**
     * Takes a cached entry of class {@code c}.
     *
     * @return the handle, or 0 on a miss (or when another thread holds the cache)
     */
    long pop(int c, long size, long requested, PoolConfig config) {
        if (!tryClaim()) {
            return 0;
        }
        try {
            int n = counts[c];
            if (n == 0) {
                add(MISSES, 1);
                return 0;
            }
            long handle = entries[c][--n];
            counts[c] = n;
            bytes -= size;
            lastUse[c] = pool.coarseNanos;
            add(HITS, 1);
            add(ALLOC_BYTES, size);
            add(ALLOC_REQUESTED, requested);
            add(CACHED_BYTES, -size);
            add(CACHED_BLOCKS, -1);
            tick(config);
            return handle;
        } finally {
            unclaim();
        }
    }

    /**
     * Caches a freed entry.
     *
     * @return false when the caller must free it to the global level instead
     */
    boolean push(int c, long handle, long size, long requested, PoolConfig config) {
        int countCap = config.localCacheCountPerClass();
        long bytesCap = pool.localCapBytes(config);
        if (countCap == 0 || size > bytesCap >>> 2 || !tryClaim()) {
            return false;
        }
        try {
            if (entries[c] == null) {
                entries[c] = new long[PoolConfig.MAX_LOCAL_COUNT_PER_CLASS];
            }
            if (counts[c] >= countCap) {
                flushOldest(c, counts[c] - countCap / 2);
            }
            for (int other = counts.length - 1; other >= 0 && bytes + size > bytesCap; other--) {
                if (counts[other] > 0) {                  // largest classes first, only as many as needed
                    long each = pool.classBytes(other);
                    long excess = bytes + size - bytesCap;
                    flushOldest(other, (int) Math.min(counts[other], (excess + each - 1) / each));
                }
            }
            entries[c][counts[c]++] = handle;
            bytes += size;
            lastUse[c] = pool.coarseNanos;
            add(FREES, 1);
            add(FREE_BYTES, size);
            add(FREE_REQUESTED, requested);
            add(CACHED_BYTES, size);
            add(CACHED_BLOCKS, 1);
            tick(config);
            return true;
        } finally {
            unclaim();
        }
    }

    /**
     * Refills class {@code c} with small objects from the shared level and pops one (claimant only).
     *
     * @return the handle, or 0 when the shared level had none or the cache was busy
     */
    long refillSmall(int c, long size, SmallObjects small, PoolConfig config) {
        if (!tryClaim()) {
            return 0;
        }
        try {
            if (entries[c] == null) {
                entries[c] = new long[PoolConfig.MAX_LOCAL_COUNT_PER_CLASS];
            }
            if (counts[c] > 0) {                  // refilled meanwhile (a release from another thread)
                long handle = entries[c][--counts[c]];
                bytes -= size;
                add(CACHED_BYTES, -size);
                add(CACHED_BLOCKS, -1);
                return handle;
            }
            long room = (pool.localCapBytes(config) - bytes) / size;
            int want = (int) Math.max(1, Math.min(Math.min(room, config.localCacheCountPerClass() / 2),
                    PoolConfig.MAX_LOCAL_COUNT_PER_CLASS - counts[c]));
            int got = small.take(c, entries[c], counts[c], want, stream);
            if (got == 0) {
                return 0;
            }
            counts[c] += got - 1;
            long handle = entries[c][counts[c]];
            bytes += (got - 1) * size;
            lastUse[c] = pool.coarseNanos;
            add(CACHED_BYTES, (got - 1) * size);
            add(CACHED_BLOCKS, got - 1);
            return handle;
        } finally {
            unclaim();
        }
    }

    private void tick(PoolConfig config) {
        if ((++operations & SWEEP_MASK) == 0) {
            long now = System.nanoTime();
            pool.coarseNanos = now;
            flushIdle(now, config.localIdleAge().toNanos());
        }
    }

    /** Flushes classes unused for longer than {@code idleNanos}; claimant only. */
    private long flushIdle(long now, long idleNanos) {
        long flushed = 0;
        for (int c = 0; c < counts.length; c++) {
            if (counts[c] > 0 && now - lastUse[c] > idleNanos) {
                flushed += counts[c] * pool.classBytes(c);
                flushOldest(c, counts[c]);
            }
        }
        return flushed;
    }

    /** Moves the {@code n} oldest entries of class {@code c} to the global level; claimant only. */
    private void flushOldest(int c, int n) {
        long[] list = entries[c];
        pool.returnToGlobal(stream, list, 0, n);
        System.arraycopy(list, n, list, 0, counts[c] - n);
        counts[c] -= n;
        long size = pool.classBytes(c);
        bytes -= n * size;
        add(CACHED_BYTES, -n * size);
        add(CACHED_BLOCKS, -n);
    }

    /** Empties the whole cache to the global level, from any thread (trim, recovery). */
    long flushAll() {
        if (!claim()) {
            return 0;
        }
        try {
            return flushAllClaimed();
        } finally {
            unclaim();
        }
    }

    /** Empties the whole cache; the caller holds the owner word. */
    long flushAllClaimed() {
        long before = bytes;
        for (int c = 0; c < counts.length; c++) {
            if (counts[c] > 0) {
                flushOldest(c, counts[c]);
            }
        }
        return before;
    }

    /** Flushes idle classes from any thread (maintenance). */
    long flushIdleNow(long idleNanos) {
        if (!claim()) {
            return 0;
        }
        try {
            return flushIdle(System.nanoTime(), idleNanos);
        } finally {
            unclaim();
        }
    }

    /**
     * Passes every cached buddy-run handle (classes {@code firstRunClass} on) to {@code action}, read
     * without claiming the owner word: for the operators' block layout only (a racy picture).
     */
    void forEachCachedRun(int firstRunClass, java.util.function.LongConsumer action) {
        for (int c = firstRunClass; c < entries.length; c++) {
            long[] stack = entries[c];
            if (stack != null) {
                int n = Math.min(counts[c], stack.length);
                for (int i = 0; i < n; i++) {
                    action.accept(stack[i]);
                }
            }
        }
    }
}
