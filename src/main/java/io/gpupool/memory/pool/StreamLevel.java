package io.gpupool.memory.pool;

import io.gpupool.memory.AllocationStream;
import io.gpupool.memory.PoolConfig;

import java.util.Arrays;
import java.util.concurrent.atomic.LongAdder;

/**
 * The stream level: one {@link LocalCache} per stream, found by the stream's ordinal.
 *
 * <pre>
 *   caches (volatile, copy on write)     retired (LongAdder per folded statistic)
 *   | 0 | 1 | 2 | null | 4 | ...          counters of caches that left the table, so totals stay right
 *     |   LocalCache of the stream with ordinal 1 (lock-free for its owner)
 * </pre>
 * <ol>
 *   <li>find ({@link #cacheFor}): one volatile array read; the entry must belong to this very stream
 *       (an ordinal is reused after a stream is destroyed).</li>
 *   <li>create: under the table's monitor, copy the array with the new cache in place; a cache it
 *       replaces (a new stream on a reused ordinal) is retired outside the monitor.</li>
 *   <li>detach / retire: the cache leaves the table, is flushed to the global level and stays claimed
 *       for good, so a thread still holding it goes to the global level; its counters are folded into
 *       {@code retired}.</li>
 * </ol>
 * The table is written only when a stream appears or goes away; every allocation reads it.
 */
final class StreamLevel implements LocalCache.CapRule {

    /** The statistics folded when a cache retires; the others (misses, cached) belong to live caches. */
    private static final int[] FOLDED = {LocalCache.HITS, LocalCache.ALLOC_BYTES, LocalCache.ALLOC_REQUESTED,
            LocalCache.FREES, LocalCache.FREE_BYTES, LocalCache.FREE_REQUESTED};

    /** The local caches together hold at most 1/this of allocated bytes, times the share factor. */
    static final int LOCAL_SHARE_DIVISOR = 8;
    /** Floor of a stream's bytes cap when it follows the share, in minimum blocks. */
    static final int LOCAL_MIN_UNITS = 4;

    private final long[] classBytes;
    private final int firstRunClass;
    /** The longest run a stream's reserve keeps, in minimum blocks. */
    private final int maxReserveUnits;
    private final LocalCache.GlobalFree global;
    private final CoarseClock clock;
    /** 0: the configured cap alone; n: at most n shares (chosen once from the growth policy). */
    private final int shareFactor;
    private final long minBlock;
    /** allocated / (LOCAL_SHARE_DIVISOR x streams), refreshed when the allocated peak is sampled. */
    private volatile long liveShareBytes;
    private final Object lock = new Object();
    private volatile LocalCache[] caches = new LocalCache[0];
    private final LongAdder[] retired = new LongAdder[LocalCache.STATS];

    StreamLevel(long[] classBytes, int firstRunClass, int maxReserveUnits, LocalCache.GlobalFree global,
                CoarseClock clock, int shareFactor, long minBlock) {
        this.classBytes = classBytes;
        this.firstRunClass = firstRunClass;
        this.maxReserveUnits = maxReserveUnits;
        this.global = global;
        this.clock = clock;
        this.shareFactor = shareFactor;
        this.minBlock = minBlock;
        for (int stat : FOLDED) {
            retired[stat] = new LongAdder();
        }
    }

    /** The table now (a racy snapshot; entries may be null). */
    LocalCache[] caches() {
        return caches;
    }

    LocalCache cacheFor(AllocationStream stream) {
        int ordinal = stream.ordinal();
        LocalCache[] current = caches;
        if (ordinal >= 0 && ordinal < current.length) {
            LocalCache cache = current[ordinal];
            if (cache != null && cache.stream == stream) {
                return cache;
            }
        }
        return createCache(stream);
    }

    private LocalCache createCache(AllocationStream stream) {
        int ordinal = stream.ordinal();
        if (ordinal < 0) {
            throw new IllegalArgumentException("stream ordinal = " + ordinal + " is invalid; allowed: >= 0");
        }
        LocalCache replaced;
        LocalCache cache;
        synchronized (lock) {
            LocalCache[] current = caches;
            if (ordinal < current.length && current[ordinal] != null && current[ordinal].stream == stream) {
                return current[ordinal];
            }
            LocalCache[] next = Arrays.copyOf(current, Math.max(current.length, ordinal + 1));
            replaced = next[ordinal];
            cache = new LocalCache(stream, classBytes, firstRunClass, maxReserveUnits, global, this, clock);
            next[ordinal] = cache;
            caches = next;
        }
        if (replaced != null) {
            retire(replaced);                                      // a new stream reuses the ordinal
        }
        return cache;
    }

    /**
     * The bytes cap of one stream's local cache now: localCacheBytesPerStream; with a share factor
     * (ON_DEMAND 1, MAPPED {@value MappedGrowth#LOCAL_SHARE_FACTOR}) at most that many shares of the
     * allocated bytes, at least {@value #LOCAL_MIN_UNITS} minimum blocks, so that the caches together
     * never strand more than a fixed fraction of live memory. One volatile read on the hot path.
     */
    @Override
    public long capBytes(PoolConfig cfg) {
        long fixed = cfg.localCacheBytesPerStream();
        long share = shareFactor == 0 ? fixed : liveShareBytes * shareFactor;
        return Math.min(fixed, Math.max(LOCAL_MIN_UNITS * minBlock, share));
    }

    /**
     * Refreshes the share from the bytes allocated now over {@code streams} table slots; written only
     * when it moved by more than 1/8, since every stream reads it on every local free.
     */
    void updateShare(long allocated, int streams) {
        long share = allocated / (LOCAL_SHARE_DIVISOR * Math.max(1, streams));
        long previous = liveShareBytes;
        if (Math.abs(share - previous) > previous >>> 3) {
            liveShareBytes = share;
        }
    }

    /** Moves everything cached for {@code stream} to the global level (the stream is destroyed). */
    void detach(AllocationStream stream) {
        LocalCache removed = null;
        synchronized (lock) {
            LocalCache[] current = caches;
            int ordinal = stream.ordinal();
            if (ordinal >= 0 && ordinal < current.length && current[ordinal] != null
                    && current[ordinal].stream == stream) {
                removed = current[ordinal];
                LocalCache[] next = current.clone();
                next[ordinal] = null;
                caches = next;
            }
        }
        if (removed != null) {
            retire(removed);
        }
    }

    private void retire(LocalCache cache) {
        cache.retire();
        for (int stat : FOLDED) {
            retired[stat].add(cache.stat(stat));
        }
    }

    /** Statistic {@code stat} summed over the live caches and, for the folded ones, the retired caches. */
    long sum(int stat) {
        return sum(stat, caches);
    }

    /**
     * {@link #sum(int)} over the caches of {@code snapshot} (an earlier {@link #caches()}), so that several sums
     * see the same caches: a cache that leaves the table between them still counts in each.
     */
    long sum(int stat, LocalCache[] snapshot) {
        long total = retired[stat] == null ? 0 : retired[stat].sum();
        for (LocalCache cache : snapshot) {
            if (cache != null) {
                total += cache.stat(stat);
            }
        }
        return total;
    }

    /** Local hits of retired caches only. */
    long retiredHits() {
        return retired[LocalCache.HITS].sum();
    }

    /**
     * Flushes every cache to the global level (recovery, trim); claims each owner word.
     *
     * @return how many caches held anything
     */
    int flushAll() {
        int flushed = 0;
        for (LocalCache cache : caches) {
            if (cache != null && cache.flushAll() > 0) {
                flushed++;
            }
        }
        return flushed;
    }

    /** Flushes size classes idle longer than {@code idleNanos} in every cache (maintenance). */
    void flushIdle(long idleNanos) {
        for (LocalCache cache : caches) {
            if (cache != null) {
                cache.flushIdleNow(idleNanos);
            }
        }
    }
}
