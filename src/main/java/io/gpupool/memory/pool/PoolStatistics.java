package io.gpupool.memory.pool;

import io.gpupool.memory.metric.Log2Histogram;
import io.gpupool.memory.metric.Peaks;

import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;

/**
 * The pool's counters and its allocated peak; never locked.
 *
 * <h2>Where each number lives</h2>
 * <pre>
 *   local hits, local frees, their bytes   single-writer counters in each LocalCache (StreamLevel sums them,
 *                                          retired caches included)
 *   the global path's blocks, bytes, hits  GlobalCounters (cells by stream ordinal, one claim per update)
 *   its rarer events (grows, maps, ...)    LongAdder here
 *   reserved bytes and their peak          Reservation (AtomicLong, exact)
 *   allocated bytes = stream level's (alloc - free) + global counters (alloc - free)
 * </pre>
 *
 * <h2>Sampling the allocated and requested peaks</h2>
 * A sample ({@link #samplePeak}) reads one line of every stream's cache, which its owner keeps writing;
 * sampling on every miss limited scaling. The facade therefore samples on every read, on every
 * global allocation of at least maxBlock/8, and when a stream has taken more than peak /
 * 2^{@value #PEAK_LAG_SHIFT} from the global level since its last sample ({@link LocalCache#addUnsampled};
 * in GLOBAL_ONLY mode, without caches, its cell of the {@link GlobalCounters}; no randomness, so replays
 * stay deterministic). Between samples the recorded peak lags by at most the local hits since the last
 * sample (at most the bytes held in local caches) plus peak / 2^{@value #PEAK_LAG_SHIFT} per stream.
 *
 * A sample also refreshes the stream share behind the local caches' bytes cap ({@link StreamLevel#capBytes}).
 *
 * <p>Allocation latency is recorded for one allocation in {@value #LATENCY_SAMPLE_EVERY} on average,
 * chosen at random, to keep the clock (two clock reads per timed allocation) off the common path: a
 * stream's cache counts down a random gap of 1 .. 2 x that - 1 ({@link LocalCache#latencySampleDue}),
 * GLOBAL_ONLY allocations and those above the maximum block draw each time ({@link #latencySampleDue}).
 * The histogram is striped.
 */
final class PoolStatistics {

    /** A stream samples the allocated peak after taking peak / 2^this from the global level. */
    static final int PEAK_LAG_SHIFT = 6;
    static final int LATENCY_SAMPLE_EVERY = 64;

    /** Blocks, bytes and hits of the global path. */
    final GlobalCounters global = new GlobalCounters();
    final LongAdder grows = new LongAdder();
    final LongAdder trims = new LongAdder();
    final LongAdder recoveries = new LongAdder();
    final LongAdder failures = new LongAdder();
    final LongAdder reclaims = new LongAdder();
    final LongAdder maps = new LongAdder();
    final LongAdder unmaps = new LongAdder();
    /** Host time inside the source's map and unmap calls (MAPPED): what growing and giving back costs. */
    final LongAdder mapNanos = new LongAdder();
    final LongAdder unmapNanos = new LongAdder();
    final Log2Histogram latency = new Log2Histogram();

    private final StreamLevel streams;
    private final AtomicLong peakAllocated = new AtomicLong();
    private final AtomicLong peakRequested = new AtomicLong();

    PoolStatistics(StreamLevel streams) {
        this.streams = streams;
    }

    /** Whether an allocation without a stream cache (GLOBAL_ONLY, above the maximum block) is timed. */
    static boolean latencySampleDue() {
        return ThreadLocalRandom.current().nextInt(LATENCY_SAMPLE_EVERY) == 0;
    }

    /**
     * Counts one block handed out by the global level on stream {@code ordinal}.
     *
     * @param sampleAfter {@link #sampleAfter()} where the stream has no local cache to keep the trigger (GLOBAL_ONLY),
     *                    else {@link GlobalCounters#NO_TRIGGER}
     * @return whether that stream took more than {@code sampleAfter} bytes through the global level since its last
     *         sample
     */
    boolean countAllocation(int ordinal, long size, long requested, long sampleAfter) {
        return global.allocated(ordinal, size, requested, sampleAfter);
    }

    /** The bytes a stream may take from the global level between two samples: peak / 2^{@value #PEAK_LAG_SHIFT}. */
    long sampleAfter() {
        return peakAllocated.get() >>> PEAK_LAG_SHIFT;
    }

    /** Counts one block given back to the global level from stream {@code ordinal}. */
    void countFree(int ordinal, long size, long requested) {
        global.freed(ordinal, size, requested);
    }

    /** Counts an allocation or a local refill the global level served without growing. */
    void countGlobalHit(int ordinal) {
        global.hit(ordinal);
    }

    long allocatedBytes() {
        return inUse(LocalCache.ALLOC_BYTES, LocalCache.FREE_BYTES, GlobalCounters.ALLOC_BYTES, GlobalCounters.FREE_BYTES);
    }

    long requestedBytes() {
        return inUse(LocalCache.ALLOC_REQUESTED, LocalCache.FREE_REQUESTED, GlobalCounters.ALLOC_REQUESTED,
                GlobalCounters.FREE_REQUESTED);
    }

    /**
     * What is handed out by one pair of counters of both levels: every "in" counter (local caches, retired ones, global
     * cells) is read before any "out" counter. The counters only grow, so the result is at most what was in use at
     * the moment between the two passes: a block freed and taken again while the reads run is missed at worst, never
     * counted twice. That matters for the peaks, which only rise: an over-count would stay for good. Both passes
     * read the same caches: a cache retired meanwhile (its counters folded into the retired totals) counts at worst its
     * frees twice or its blocks still out twice, never its allocations without its frees.
     */
    private long inUse(int localIn, int localOut, int globalIn, int globalOut) {
        LocalCache[] caches = streams.caches();
        long in = streams.sum(localIn, caches) + global.sum(globalIn);
        long out = streams.sum(localOut, caches) + global.sum(globalOut);
        return in - out;
    }

    /** The allocated peak, raised to the bytes allocated now first (the recorded one may lag: class comment). */
    long peakAllocatedNow() {
        Peaks.raise(peakAllocated, allocatedBytes());
        return peakAllocated.get();
    }

    /** The highest requested bytes seen by a sample (taken with the allocated peak), after sampling now. */
    long peakRequestedNow() {
        Peaks.raise(peakRequested, requestedBytes());
        return peakRequested.get();
    }

    void resetPeak() {
        peakAllocated.set(allocatedBytes());
        peakRequested.set(requestedBytes());
    }

    /** Raises the allocated and requested peaks to the bytes allocated and requested now; refreshes the stream share. */
    void samplePeak() {
        long allocated = allocatedBytes();
        long requested = requestedBytes();
        Peaks.raise(peakAllocated, allocated);
        Peaks.raise(peakRequested, requested);
        streams.updateShare(allocated, streams.caches().length);
    }
}
