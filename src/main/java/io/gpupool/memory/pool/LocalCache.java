package io.gpupool.memory.pool;

import io.gpupool.memory.AllocationStream;
import io.gpupool.memory.PoolConfig;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.concurrent.ThreadLocalRandom;

/**
 * One stream's local cache: free buddy runs and small objects by class, used by the owning stream
 * without locks.
 *
 * <h2>Layout</h2>
 * <pre>
 *   class index c:  0 .. S-1            small-object classes (SizeClasses)
 *                   S + n - 1           buddy runs of n minimum blocks, n = 1 .. maxBlock/minBlock
 *
 *   hot (one long[] per cache; P = {@value #PAD} longs = 128 bytes of padding at each end):
 *   | P pad | owner | ops | unsampled | until sample | last run | reserve bytes | unsettled mark |
 *     stats[0..8] | count[0] lastUse[0] | ... | P pad |
 *
 *   entries[c]  (long[P + 64 + P], allocated on first use of class c):
 *   | P pad | handle 0 (oldest) ... handle count[c]-1 (newest, top) | free | P pad |
 * </pre>
 * Everything an operation writes in steady state lives inside these padded arrays and nowhere else
 * (the cache object itself has only final fields). The padding is there for the garbage collector:
 * it decides where the caches of different streams end up (they are all reached from one array and
 * copied together), and before the padding an owner word, a counter array or the top of a stack could
 * share a cache line with another stream's, so streams that never touch each other's memory could
 * invalidate each other's lines on every operation (false sharing; docs/benchmarks.md, scaling across
 * streams). 128 bytes rather than 64
 * because the adjacent-line prefetcher moves lines in pairs. A class's count and last use sit side by
 * side, so one operation writes two or three lines, all of them private to the stream.
 *
 * <h2>Ownership instead of a lock</h2>
 * An {@code owner} word is claimed with one uncontended CAS (0 -&gt; 1) around each operation and
 * released with a plain release store. The CAS is what lets another thread (trim, recovery) take the
 * cache's memory safely: without a store-load barrier on the owner's side, the owner could pop an
 * entry that the other thread is flushing at the same moment. On a line the owner already holds
 * the CAS costs a few nanoseconds; shared lines around it are what would make it expensive. The
 * owning stream is used by one request at a time, so the claim practically always succeeds; when it
 * does not (a block released from a callback thread while the stream serves the next request) the
 * caller simply goes to the global level instead of waiting. Only maintenance (trim, recovery,
 * detach, idle sweep from another thread) spins for the word, and owners hold it for a few stores.
 * Lock order: owner word, then global order locks / class locks; nothing that holds a global lock
 * ever claims an owner word, and nobody holding an owner word takes the grow lock.
 *
 * <h2>Steps</h2>
 * <ol>
 *   <li>pop: claim, take the top entry of class c (a hit); for an empty run class, carve the run from the
 *       stream's reserve ({@link RunReserve}: one free run kept for requests of varying size, as request
 *       arenas make them; a hit too); else count a miss; release.</li>
 *   <li>push: claim; if class c is at its count cap, flush its older half to the global level (one
 *       fence for the batch); if the bytes cap would be passed, flush the oldest entries of the
 *       largest classes until it fits; push; release. A block larger than a quarter of the bytes
 *       cap does not enter the class stacks (large blocks are rare per request and expensive to strand
 *       in one stream); a run of that kind stays only as the reserve, and only when it is the run the
 *       stream took last (an arena freed after its forward, not one of many tensors), as does a run
 *       carved from the reserve, which merges there with the remainder it was cut from.
 *       The bytes cap comes from the {@link CapRule} (the growth strategy): the configured cap,
 *       under MAPPED and ON_DEMAND growth lowered to the stream's share of a fraction of the pool's
 *       allocated bytes (one volatile read).</li>
 *   <li>flush (cap, idle, trim, reclaim): to the global level under one fence of the stream, or none when all
 *       of the cache is <em>settled</em> (freed by {@link io.gpupool.memory.DeviceBlock#releaseSettled}, or before a
 *       host sync of the stream that returned since: one {@link AllocationStream#syncMark}, of the newest unsettled
 *       push). A server's streams are busy with their next request when another stream's map reclaims their
 *       caches; a fence recorded then would keep memory nothing uses mapped until that request ends.</li>
 *   <li>uses are stamped with the {@link CoarseClock} (no clock call on the hot path); every 1024
 *       operations the owner advances it and flushes classes idle longer than {@code localIdleAge}.</li>
 * </ol>
 *
 * <h2>Statistics</h2>
 * Single-writer counters in the padded {@code hot} array: written by the claimant with
 * {@code setOpaque}, read by metrics with {@code getOpaque}, never locked. The cached bytes counter
 * is also the cache's own byte count (one store, not two). The {@code unsampled} slot is the
 * trigger for sampling the pool's allocated peak ({@link #addUnsampled}, {@link PoolStatistics});
 * {@code until sample} counts down the allocations to the next timed one ({@link #latencySampleDue}).
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
    static final int STATS = 9;
    private static final int SWEEP_MASK = 1023;
    private static final long RETIRED = 2;

    /** Padding at each end of the padded arrays, in longs (128 bytes: two cache lines). */
    static final int PAD = 16;
    private static final int OWNER = PAD;
    private static final int OPERATIONS = PAD + 1;
    private static final int UNSAMPLED = PAD + 2;
    private static final int UNTIL_SAMPLE = PAD + 3;
    /** The run this stream took last (from its cache or the global level): the one a reserve may keep. */
    private static final int LAST_RUN = PAD + 4;
    /** Bytes the reserve holds (part of the cached bytes; the class stacks' cap leaves them out). */
    private static final int RESERVE_BYTES = PAD + 5;
    /** The stream's sync mark at the newest push not settled, or {@link #ALL_SETTLED}; see "flush" above. */
    private static final int UNSETTLED_MARK = PAD + 6;
    private static final int STAT_BASE = PAD + 7;
    private static final long ALL_SETTLED = -1;
    /** hot[CLASS_BASE + 2c] = entries of class c, hot[CLASS_BASE + 2c + 1] = its last use (coarse nanos). */
    private static final int CLASS_BASE = STAT_BASE + STATS;
    private static final int ENTRIES = PoolConfig.MAX_LOCAL_COUNT_PER_CLASS;

    private static final VarHandle LONGS = MethodHandles.arrayElementVarHandle(long[].class);

    /** Where flushed entries go: the global level, and nothing else of the pool. */
    interface GlobalFree {
        /**
         * Frees {@code handles[from, to)} from {@code stream} into the global level under one fence recorded on the
         * stream, or none when {@code settled} (the stream finished all work that used them).
         */
        void returnToGlobal(AllocationStream stream, long[] handles, int from, int to, boolean settled);
    }

    /** The bytes cap of one stream's cache now (the growth strategy decides it). */
    @FunctionalInterface
    interface CapRule {
        long capBytes(PoolConfig config);
    }

    final int ordinal;
    final AllocationStream stream;
    private final GlobalFree global;
    private final CapRule cap;
    private final CoarseClock clock;
    /** Bytes of each class index (shared, read-only). */
    private final long[] classBytes;
    /** Per class: null until first use, then a padded stack (see the layout above). */
    private final long[][] entries;
    private final int classCount;
    /** Owner word, operation count, statistics, per-class counts and last uses; padded at both ends. */
    private final long[] hot;
    /** Class index of a run of one minimum block; classes below are small objects. */
    private final int firstRunClass;
    /** The run kept for requests of varying size (request arenas); touched only by the claimant. */
    private final RunReserve reserve;

    LocalCache(AllocationStream stream, long[] classBytes, int firstRunClass, int maxReserveUnits, GlobalFree global,
               CapRule cap, CoarseClock clock) {
        this.global = global;
        this.cap = cap;
        this.clock = clock;
        this.classBytes = classBytes;
        this.stream = stream;
        this.ordinal = stream.ordinal();
        int classCount = classBytes.length;
        this.classCount = classCount;
        this.entries = new long[classCount][];
        this.hot = new long[CLASS_BASE + 2 * classCount + PAD];
        this.firstRunClass = firstRunClass;
        int unitShift = Long.numberOfTrailingZeros(classBytes[Math.min(firstRunClass, classCount - 1)]);
        this.reserve = new RunReserve(unitShift, maxReserveUnits,
                run -> global.returnToGlobal(stream, new long[] {run}, 0, 1, settled()));
        hot[UNSETTLED_MARK] = ALL_SETTLED;
    }

    boolean tryClaim() {
        return LONGS.compareAndSet(hot, OWNER, 0L, 1L);
    }

    /**
     * Waits for the owner word (maintenance from another thread).
     *
     * @return false if the cache was retired meanwhile (it is empty and must not be touched)
     */
    boolean claim() {
        int spins = 0;
        while (!LONGS.compareAndSet(hot, OWNER, 0L, 1L)) {
            if ((long) LONGS.getVolatile(hot, OWNER) == RETIRED) {
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
        LONGS.setRelease(hot, OWNER, RETIRED);
    }

    void unclaim() {
        LONGS.setRelease(hot, OWNER, 0L);
    }

    long stat(int index) {
        return (long) LONGS.getOpaque(hot, STAT_BASE + index);
    }

    private void add(int index, long delta) {
        LONGS.setOpaque(hot, STAT_BASE + index, hot[STAT_BASE + index] + delta);
    }

    /**
     * Adds {@code bytes} taken from the global level for this stream and says whether they passed
     * {@code limit} since the last time this returned true (then the pool samples its peak; see
     * {@link PoolStatistics#samplePeak}). Written by the allocating thread without claiming: a lost update
     * when two threads allocate on one stream at once only delays a sample.
     */
    boolean addUnsampled(long bytes, long limit) {
        long total = hot[UNSAMPLED] + bytes;
        boolean due = total > limit;
        hot[UNSAMPLED] = due ? 0 : total;
        return due;
    }

    /**
     * Whether the allocation about to start on this stream is one whose latency the pool records. The
     * gaps between timed allocations are drawn at random (mean {@value PoolStatistics#LATENCY_SAMPLE_EVERY}),
     * so a request's fixed pattern of allocations cannot always put the same one under the clock, and
     * the common case is one decrement on a line the stream writes anyway. Written without claiming,
     * like {@link #addUnsampled}: a lost update only moves a sample.
     */
    boolean latencySampleDue() {
        long left = hot[UNTIL_SAMPLE] - 1;
        if (left > 0) {
            hot[UNTIL_SAMPLE] = left;
            return false;
        }
        // the next gap: 1 .. 2 x LATENCY_SAMPLE_EVERY - 1, whose mean is the constant (a compile-time
        // constant: no dependency on PoolStatistics, which reads these caches)
        hot[UNTIL_SAMPLE] = ThreadLocalRandom.current().nextInt(1, 2 * PoolStatistics.LATENCY_SAMPLE_EVERY);
        return left == 0;
    }

    private int count(int c) {
        return (int) hot[CLASS_BASE + 2 * c];
    }

    private void setCount(int c, int n) {
        hot[CLASS_BASE + 2 * c] = n;
    }

    private void touch(int c) {
        hot[CLASS_BASE + 2 * c + 1] = clock.nanos();
    }

    private long[] stack(int c) {
        long[] stack = entries[c];
        if (stack == null) {
            stack = new long[PAD + ENTRIES + PAD];
            entries[c] = stack;
        }
        return stack;
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
            int slot = CLASS_BASE + 2 * c;
            int n = (int) hot[slot];
            if (n == 0) {
                return c >= firstRunClass ? carve(c, size, requested, config) : miss();
            }
            long handle = entries[c][PAD + --n];
            hot[slot] = n;
            hot[slot + 1] = clock.nanos();
            if (c >= firstRunClass) {
                hot[LAST_RUN] = handle;
            }
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

    private long miss() {
        add(MISSES, 1);
        return 0;
    }

    /** A run of class {@code c} from the reserve ({@link RunReserve}, step 1) on a miss of its stack; claimant only. */
    private long carve(int c, long size, long requested, PoolConfig config) {
        long before = reserve.bytes();
        int blocksBefore = reserve.blocks();
        long handle = reserve.take(c - firstRunClass + 1, config.localCacheBytesPerStream(), clock.nanos());
        reserveChanged(before, blocksBefore);
        if (handle == 0) {
            return miss();
        }
        hot[LAST_RUN] = handle;
        add(HITS, 1);
        add(ALLOC_BYTES, size);
        add(ALLOC_REQUESTED, requested);
        tick(config);
        return handle;
    }

    /**
     * Caches a freed entry: a run the class stacks do not take (above a quarter of the bytes cap), or one carved
     * from the reserve while its remainder waits, goes to the reserve ({@link RunReserve}, step 2).
     *
     * @return false when the caller must free it to the global level instead
     */
    boolean push(int c, long handle, long size, long requested, PoolConfig config, boolean settled) {
        int countCap = config.localCacheCountPerClass();
        long bytesCap = cap.capBytes(config);
        if (c >= firstRunClass && (size > bytesCap >>> 2 || reserve.carvedOut())) {
            int kept = pushToReserve(handle, size, requested, config, settled);
            if (kept != 0 || size > bytesCap >>> 2) {
                return kept > 0;
            }
        }
        if (countCap == 0 || size > bytesCap >>> 2 || !tryClaim()) {
            return false;
        }
        try {
            if (!settled) {
                unsettledPush();
            }
            long[] stack = stack(c);
            if (count(c) >= countCap) {
                flushOldest(c, count(c) - countCap / 2);
            }
            long bytes = hot[STAT_BASE + CACHED_BYTES] - hot[RESERVE_BYTES];   // the reserve has its own bound
            for (int other = classCount - 1; other >= 0 && bytes + size > bytesCap; other--) {
                int n = count(other);
                if (n > 0) {                              // largest classes first, only as many as needed
                    long each = classBytes[other];
                    long excess = bytes + size - bytesCap;
                    flushOldest(other, (int) Math.min(n, (excess + each - 1) / each));
                    bytes = hot[STAT_BASE + CACHED_BYTES] - hot[RESERVE_BYTES];
                }
            }
            int slot = CLASS_BASE + 2 * c;
            int n = (int) hot[slot];
            stack[PAD + n] = handle;
            hot[slot] = n + 1;
            hot[slot + 1] = clock.nanos();
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
     * The reserve's part of {@link #push}. Only the run the stream took last may become the reserve: a stream
     * running request arenas frees its arena right after taking it, while a stream that holds many blocks at once
     * (a block per tensor) frees older ones, which the class stacks and the global level serve as before.
     *
     * @return 1 kept, 0 refused, -1 the cache was busy
     */
    private int pushToReserve(long handle, long size, long requested, PoolConfig config, boolean settled) {
        if (config.localCacheCountPerClass() == 0) {
            return 0;                                              // the local level is off
        }
        if (!tryClaim()) {
            return -1;
        }
        try {
            long before = reserve.bytes();
            int blocksBefore = reserve.blocks();
            long limit = handle == hot[LAST_RUN] ? config.localCacheBytesPerStream() : 0;
            if (!settled) {
                unsettledPush();                                   // before give: the run it lets go may be this one
            }
            if (!reserve.give(handle, limit, clock.nanos())) {
                return 0;
            }
            add(FREES, 1);
            add(FREE_BYTES, size);
            add(FREE_REQUESTED, requested);
            reserveChanged(before, blocksBefore);
            tick(config);
            return 1;
        } finally {
            unclaim();
        }
    }

    /** Notes an entry that work queued on the stream may still use (claimant only; see "flush" above). */
    private void unsettledPush() {
        hot[UNSETTLED_MARK] = stream.syncMark();
    }

    /** Whether no queued work uses anything in the cache (claimant only): see "flush" above. */
    private boolean settled() {
        long mark = hot[UNSETTLED_MARK];
        if (mark == ALL_SETTLED) {
            return true;
        }
        if (stream.synchronizedSince(mark)) {
            hot[UNSETTLED_MARK] = ALL_SETTLED;                     // covers every entry pushed before the mark
            return true;
        }
        return false;
    }

    /**
     * Notes a run the stream took from the global level (see {@link #pushToReserve}). Written without claiming,
     * like {@link #addUnsampled}: a lost update only keeps one run out of the reserve.
     */
    void tookRun(long handle) {
        hot[LAST_RUN] = handle;
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
            long[] stack = stack(c);
            int n = count(c);
            if (n > 0) {                          // refilled meanwhile (a release from another thread)
                long handle = stack[PAD + --n];
                setCount(c, n);
                add(CACHED_BYTES, -size);
                add(CACHED_BLOCKS, -1);
                return handle;
            }
            long room = (cap.capBytes(config) - hot[STAT_BASE + CACHED_BYTES]) / size;
            int want = (int) Math.max(1, Math.min(Math.min(room, config.localCacheCountPerClass() / 2), ENTRIES));
            int got = small.take(c, stack, PAD, want, stream);
            if (got == 0) {
                return 0;
            }
            setCount(c, got - 1);
            long handle = stack[PAD + got - 1];
            touch(c);
            add(CACHED_BYTES, (got - 1) * size);
            add(CACHED_BLOCKS, got - 1);
            return handle;
        } finally {
            unclaim();
        }
    }

    private void tick(PoolConfig config) {
        long operations = hot[OPERATIONS] + 1;
        hot[OPERATIONS] = operations;
        if ((operations & SWEEP_MASK) == 0) {
            long now = System.nanoTime();
            clock.advance(now);
            flushIdle(now, config.localIdleAge().toNanos());
        }
    }

    /** Flushes classes unused for longer than {@code idleNanos}; claimant only. */
    private long flushIdle(long now, long idleNanos) {
        long flushed = 0;
        for (int c = 0; c < classCount; c++) {
            int n = count(c);
            if (n > 0 && now - hot[CLASS_BASE + 2 * c + 1] > idleNanos) {
                flushed += n * classBytes[c];
                flushOldest(c, n);
            }
        }
        if (reserve.blocks() > 0 && now - reserve.lastUse() > idleNanos) {
            flushed += flushReserve();
        }
        return flushed;
    }

    /** Moves the {@code n} oldest entries of class {@code c} to the global level; claimant only. */
    private void flushOldest(int c, int n) {
        long[] list = entries[c];
        int count = count(c);
        global.returnToGlobal(stream, list, PAD, PAD + n, settled());
        System.arraycopy(list, PAD + n, list, PAD, count - n);
        setCount(c, count - n);
        long size = classBytes[c];
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
        long before = hot[STAT_BASE + CACHED_BYTES];
        for (int c = 0; c < classCount; c++) {
            int n = count(c);
            if (n > 0) {
                flushOldest(c, n);
            }
        }
        flushReserve();
        return before;
    }

    /** Moves the reserve's runs to the global level; claimant only. @return their bytes */
    private long flushReserve() {
        int blocks = reserve.blocks();
        long bytes = reserve.flush();
        add(CACHED_BYTES, -bytes);
        add(CACHED_BLOCKS, -blocks);
        hot[RESERVE_BYTES] = 0;
        return bytes;
    }

    /** Books a change of the reserve since it held {@code bytesBefore} in {@code blocksBefore} runs. */
    private void reserveChanged(long bytesBefore, int blocksBefore) {
        long bytes = reserve.bytes();
        add(CACHED_BYTES, bytes - bytesBefore);
        add(CACHED_BLOCKS, reserve.blocks() - blocksBefore);
        hot[RESERVE_BYTES] = bytes;
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
        for (int c = firstRunClass; c < classCount; c++) {
            long[] stack = entries[c];
            if (stack != null) {
                int n = Math.min(count(c), ENTRIES);
                for (int i = 0; i < n; i++) {
                    action.accept(stack[PAD + i]);
                }
            }
        }
        reserve.forEachRun(action);
    }
}
