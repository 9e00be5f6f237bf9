package io.gpupool.model.graph;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Set;
import java.util.concurrent.atomic.LongAdder;

/**
 * One device's cached graphs, bounded in count and in pool bytes, least recently used evicted first.
 *
 * <pre>
 *   request ── acquire(key) ── cached and idle? ──yes──► replay (entry in use) ──► release(entry)
 *                                   │ no                                                │
 *                                   ▼                                    evict-when-released? ─► destroy
 *                      claimCapture(key): not cached, not pending, not given up?
 *                                   │ yes: pending; the capture thread runs
 *                                   ▼
 *      reserve(key, bytes): evict idle LRU entries until count and bytes fit ── no room ─► dropped
 *                                   ▼
 *                      install(entry) / captureFailed(key)
 * </pre>
 * <ol>
 *   <li>An entry serves one replay at a time ({@code inUse}); a request that finds it busy runs eagerly.</li>
 *   <li>Capacity is taken before the capture allocates its pool block ({@link #reserve}), so cached
 *       plus in-progress bytes never exceed {@code maxBytes}.</li>
 *   <li>Eviction takes idle entries out under the lock and destroys them outside it (graph destroy and
 *       pool release are device calls); an entry in use when it is evicted (tuning, model unload) is
 *       marked and destroyed by the replay that releases it.</li>
 *   <li>A key whose capture or replay failed is tried again only after {@link #RETRY_AFTER_MISSES}
 *       more misses (a passing cause, such as memory pressure under load, gets time to clear), and
 *       given up after {@link #CAPTURE_ATTEMPTS} failures, or at once when its block can never fit;
 *       until the cache is retuned. So a forward that cannot be captured costs a few attempts, never
 *       one per request.</li>
 *   <li>An unloaded model gets no new claims, and a capture of it still in flight is destroyed when it
 *       ends instead of being cached.</li>
 * </ol>
 * All state is guarded by this object's monitor; sections are map and counter updates. Metrics read
 * volatile fields and {@link LongAdder}s without the lock.
 */
final class GraphCache implements GraphCacheMetrics {

    /** Keys remembered as failed; past this many the memory is cleared (they are retried). */
    static final int FAILED_KEYS = 1024;
    /** Failed captures (or replays) of one key after which it is not captured again until a retune. */
    static final int CAPTURE_ATTEMPTS = 3;
    /** Misses of a failed key before its next capture attempt. */
    static final int RETRY_AFTER_MISSES = 64;

    /** Access-ordered: iteration starts at the least recently used. Guarded by {@code this}. */
    private final LinkedHashMap<GraphKey, CapturedForward> entries = new LinkedHashMap<>(16, 0.75f, true);
    /** Guarded by {@code this}. */
    private final Set<GraphKey> pending = new HashSet<>();
    /** Guarded by {@code this}. */
    private final HashMap<GraphKey, Failures> failed = new HashMap<>();
    /** Models unloaded: a capture of theirs still in flight is dropped when it ends. Guarded by {@code this}. */
    private final Set<Object> unloaded = java.util.Collections.newSetFromMap(new java.util.IdentityHashMap<>());
    /** Bytes reserved for the capture in progress, by key. Guarded by {@code this}. */
    private final LinkedHashMap<GraphKey, Long> reserved = new LinkedHashMap<>();

    private volatile boolean enabled;
    private volatile int maxCount;
    private volatile long maxBytes;
    /** Written under the lock. */
    private volatile int graphs;
    private volatile long bytes;

    private final LongAdder hits = new LongAdder();
    private final LongAdder misses = new LongAdder();
    private final LongAdder captures = new LongAdder();
    private final LongAdder captureFailures = new LongAdder();
    private final LongAdder replayFailures = new LongAdder();
    private final LongAdder evictions = new LongAdder();

    GraphCache(GraphLimits limits) {
        this.enabled = limits.enabled();
        this.maxCount = limits.maxCount();
        this.maxBytes = limits.maxBytes();
    }

    /** The cached, idle graph for {@code key}, now marked in use; null (a miss) otherwise. */
    synchronized CapturedForward acquire(GraphKey key) {
        CapturedForward entry = enabled ? entries.get(key) : null;
        if (entry == null || entry.inUse) {
            misses.increment();
            return null;
        }
        entry.inUse = true;
        hits.increment();
        return entry;
    }

    /** Ends a replay. */
    void release(CapturedForward entry) {
        boolean destroy;
        synchronized (this) {
            entry.inUse = false;
            destroy = entry.evictWhenReleased;
        }
        if (destroy) {
            entry.destroy();
        }
    }

    /** Ends a replay that found the graph does not fit its forward: drops the graph, remembers the key. */
    void invalidate(CapturedForward entry) {
        replayFailures.increment();
        synchronized (this) {
            entry.inUse = false;
            if (entries.get(entry.key()) == entry) {
                entries.remove(entry.key());
                bytes -= entry.blockBytes();
                graphs = entries.size();
            }
            rememberFailed(entry.key());
        }
        entry.destroy(); // in use until now, so no eviction destroyed it
    }

    /**
     * True when the caller should capture {@code key} (nothing cached or pending for it, and not given up or
     * waiting out its retry spacing after a failure); marks it pending. Called once per eager miss.
     */
    synchronized boolean claimCapture(GraphKey key) {
        if (!enabled || entries.containsKey(key) || pending.contains(key) || unloaded.contains(key.model())) {
            return false;
        }
        Failures failures = failed.get(key);
        if (failures != null) {
            if (failures.attempts >= CAPTURE_ATTEMPTS || ++failures.missesSince < RETRY_AFTER_MISSES) {
                return false;
            }
            failures.missesSince = 0;
        }
        pending.add(key);
        return true;
    }

    /** One failed key's record; guarded by the cache's monitor. */
    private static final class Failures {
        int attempts;
        int missesSince;
    }

    /** Forgets a claim whose capture will not run (its queue was full). */
    synchronized void unclaim(GraphKey key) {
        pending.remove(key);
    }

    /**
     * Makes room for a graph of {@code blockBytes}, evicting idle least-recently-used graphs, and
     * reserves it. False (and the claim dropped) when it cannot fit: larger than the whole cache, or
     * the room is held by graphs in use.
     */
    boolean reserve(GraphKey key, long blockBytes) {
        List<CapturedForward> evicted = new ArrayList<>();
        boolean fits;
        synchronized (this) {
            fits = enabled && pending.contains(key) && blockBytes <= maxBytes && maxCount > 0;
            if (fits) {
                fits = evictUntil(maxCount - 1 - reserved.size(), maxBytes - blockBytes, evicted);
            }
            if (fits) {
                reserved.put(key, blockBytes);
                bytes += blockBytes;
            } else {
                pending.remove(key);
                if (blockBytes > maxBytes) {
                    rememberFailed(key, true); // can never fit: no dry run per request until the cache is retuned
                }
            }
        }
        destroyAll(evicted);
        return fits;
    }

    /** Caches a captured graph whose room {@link #reserve} took. */
    void install(CapturedForward entry) {
        boolean keep;
        synchronized (this) {
            GraphKey key = entry.key();
            pending.remove(key);
            Long held = reserved.remove(key);
            keep = held != null && enabled && !unloaded.contains(key.model());
            if (keep) {
                failed.remove(key);
                bytes += entry.blockBytes() - held;
                entries.put(key, entry);
                graphs = entries.size();
                captures.increment();
            } else if (held != null) {
                bytes -= held;
            }
        }
        if (!keep) {
            evictions.increment();
            entry.destroy(); // disabled or closed while capturing
        }
    }

    /** A capture that failed after (or before) {@link #reserve}: gives the room back, remembers the key. */
    synchronized void captureFailed(GraphKey key) {
        captureFailures.increment();
        pending.remove(key);
        Long held = reserved.remove(key);
        if (held != null) {
            bytes -= held;
        }
        rememberFailed(key);
    }

    private void rememberFailed(GraphKey key) {
        rememberFailed(key, false);
    }

    private void rememberFailed(GraphKey key, boolean forGood) {
        if (failed.size() >= FAILED_KEYS && !failed.containsKey(key)) {
            failed.clear();
        }
        Failures failures = failed.computeIfAbsent(key, k -> new Failures());
        failures.attempts = forGood ? CAPTURE_ATTEMPTS : failures.attempts + 1;
        failures.missesSince = 0;
    }

    /** Applies new limits; evicts (or marks, when in use) what no longer fits. Failed keys are retried. */
    void tune(GraphLimits limits) {
        List<CapturedForward> evicted = new ArrayList<>();
        synchronized (this) {
            enabled = limits.enabled();
            maxCount = limits.maxCount();
            maxBytes = limits.maxBytes();
            failed.clear();
            if (!enabled) {
                evictMatching(key -> true, evicted);
            } else {
                evictUntil(maxCount - reserved.size(), maxBytes, evicted);
                evictBusyUntil(maxCount - reserved.size(), maxBytes);
            }
        }
        destroyAll(evicted);
    }

    /** The limits in force. */
    GraphLimits limits() {
        return new GraphLimits(enabled, maxCount, maxBytes);
    }

    /** Drops every graph of {@code model} (unload); those in use are destroyed when released. */
    void evictModel(Object model) {
        List<CapturedForward> evicted = new ArrayList<>();
        synchronized (this) {
            evictMatching(key -> key.model() == model, evicted);
            failed.keySet().removeIf(key -> key.model() == model);
            unloaded.add(model);
        }
        destroyAll(evicted);
    }

    /** Drops every graph (shutdown); those in use are destroyed when released. */
    void evictAll() {
        List<CapturedForward> evicted = new ArrayList<>();
        synchronized (this) {
            enabled = false;
            evictMatching(key -> true, evicted);
        }
        destroyAll(evicted);
    }

    /** Evicts idle entries, oldest first, until at most {@code count} remain within {@code room} bytes. */
    private boolean evictUntil(int count, long room, List<CapturedForward> evicted) {
        Iterator<CapturedForward> it = entries.values().iterator();
        while ((entries.size() > count || bytes > room) && it.hasNext()) {
            CapturedForward entry = it.next();
            if (!entry.inUse) {
                it.remove();
                takeOut(entry, evicted);
            }
        }
        graphs = entries.size();
        return entries.size() <= count && bytes <= room;
    }

    /** After {@link #evictUntil}, takes out in-use entries too (destroyed on release) until the limits hold. */
    private void evictBusyUntil(int count, long room) {
        Iterator<CapturedForward> it = entries.values().iterator();
        while ((entries.size() > count || bytes > room) && it.hasNext()) {
            CapturedForward entry = it.next();
            it.remove();
            bytes -= entry.blockBytes();
            entry.evictWhenReleased = true;
            evictions.increment();
        }
        graphs = entries.size();
    }

    private void evictMatching(java.util.function.Predicate<GraphKey> which, List<CapturedForward> evicted) {
        Iterator<CapturedForward> it = entries.values().iterator();
        while (it.hasNext()) {
            CapturedForward entry = it.next();
            if (which.test(entry.key())) {
                it.remove();
                if (entry.inUse) {
                    bytes -= entry.blockBytes();
                    entry.evictWhenReleased = true;
                    evictions.increment();
                } else {
                    takeOut(entry, evicted);
                }
            }
        }
        graphs = entries.size();
    }

    private void takeOut(CapturedForward entry, List<CapturedForward> evicted) {
        bytes -= entry.blockBytes();
        evictions.increment();
        evicted.add(entry);
    }

    private static void destroyAll(List<CapturedForward> evicted) {
        RuntimeException failure = null;
        for (CapturedForward entry : evicted) {
            try {
                entry.destroy();
            } catch (RuntimeException e) {
                if (failure == null) {
                    failure = e;
                } else {
                    failure.addSuppressed(e);
                }
            }
        }
        if (failure != null) {
            throw failure;
        }
    }

    @Override
    public boolean enabled() {
        return enabled;
    }

    @Override
    public int graphs() {
        return graphs;
    }

    @Override
    public long bytes() {
        return bytes;
    }

    @Override
    public int maxCount() {
        return maxCount;
    }

    @Override
    public long maxBytes() {
        return maxBytes;
    }

    @Override
    public long hits() {
        return hits.sum();
    }

    @Override
    public long misses() {
        return misses.sum();
    }

    @Override
    public long captures() {
        return captures.sum();
    }

    @Override
    public long captureFailures() {
        return captureFailures.sum();
    }

    @Override
    public long replayFailures() {
        return replayFailures.sum();
    }

    @Override
    public long evictions() {
        return evictions.sum();
    }
}
