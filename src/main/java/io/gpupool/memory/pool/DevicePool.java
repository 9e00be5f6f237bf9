package io.gpupool.memory.pool;

import io.gpupool.memory.AllocationStream;
import io.gpupool.memory.AllocatorMode;
import io.gpupool.memory.ChunkSource;
import io.gpupool.memory.DeviceAllocator;
import io.gpupool.memory.DeviceBlock;
import io.gpupool.memory.GrowthPolicy;
import io.gpupool.memory.OutOfDeviceMemoryException;
import io.gpupool.memory.PoolConfig;
import io.gpupool.memory.PoolTuning;
import io.gpupool.memory.StreamFence;

import io.gpupool.memory.metric.AllocatorCounters;
import io.gpupool.memory.metric.BlockLayoutMetric;
import io.gpupool.memory.metric.ChunkMetric;
import io.gpupool.memory.metric.FreeOrderMetric;
import io.gpupool.memory.metric.LatencyDistribution;
import io.gpupool.memory.metric.Log2Histogram;
import io.gpupool.memory.metric.Peaks;
import io.gpupool.memory.metric.PoolMetrics;
import io.gpupool.memory.metric.SizeClassMetric;
import io.gpupool.memory.metric.StreamCacheMetric;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.Supplier;

/**
 * The two-level device memory pool: stream-local caches in front of a global buddy allocator over
 * chunks obtained from a {@link ChunkSource}.
 *
 * <h2>Levels</h2>
 * <pre>
 *   allocate(bytes, stream)
 *     |  bytes &gt; maxBlock, ON_DEMAND: a span of adjacent free max blocks in one chunk (BuddyLevel.allocateSpan;
 *     |                       chunks larger than maxBlock come from initialBytes or reserve()), else as below
 *     |  bytes &gt; maxBlock ------&gt; a freed dedicated chunk at most 1/8 larger, else a new one from the source
 *     |                             (ON_DEMAND: first give back cached dedicated chunks and, if that did
 *     |                              not cover the request, flush + coalesce and give back empty buddy chunks)
 *     |  class c = small class (bytes &lt; minBlock) or run of n = ceil(bytes / minBlock) blocks
 *     v
 *   LocalCache[stream.ordinal()]   lock-free for its owner          (hit: return)
 *     v miss
 *   small c: SmallObjects (lock per class; refills the local class with a batch; prefers a slab
 *            without other streams' pending fences)
 *   run n:   BuddyLevel   (lock per order; split + tail trimming;  (hit: return)
 *            a chunk without other streams' pending fences first, then any)
 *     v nothing free
 *   coalesce all orders, retry                                       (hit: return)
 *     v
 *   grow lock: retry; flush every local cache and coalesce, retry (ON_DEMAND always; LAZY/HYBRID
 *     when the caches hold at least the request)
 *   grow: ON_DEMAND returns empty chunks smaller than the request's block, then grows one chunk of
 *     max(block of the request, maxBlock); LAZY/HYBRID grow the next doubling step.
 *   on refusal or cap: staged recovery
 *     1. flush every local cache   2. release empty slabs   3. coalesce   4. retry
 *     5. return empty chunks (waiting for their fences)   6. grow by exactly the request   7. fail
 * </pre>
 *
 * <h2>Why MAPPED is the default (fragmentation without device calls per request)</h2>
 * Measured on the BERT serving trace (docs/benchmarks.md, "Fragmentation"): LAZY doubling held
 * 3.78 x peak live; ON_DEMAND (below) 1.88 x with 256 MiB blocks, 1.14 x only with 32 MiB blocks at
 * ~25 device allocations per request (cuMemFree synchronises the whole device). The excess sat
 * in free buddy space between live blocks: a large tensor needs one free aligned block. With a
 * source that maps ({@link ChunkSource#supportsMapping()}), MAPPED growth removes the cause
 * instead of trading against it: chunks are address space, memory is mapped under the runs in use
 * (see "MAPPED: map and unmap" below), and free space between live blocks costs nothing unless it
 * is mapped. Mapped memory is held to the allocated high-water mark + {@link PoolConfig#mappedSlack()} (1/16):
 * 1.08-1.12 x peak live on the trace. A stream's local cache holds at most its share of half the
 * allocated bytes (see {@link #MAPPED_LOCAL_SHARE_FACTOR}: with the full configured cap the caches
 * kept the pool over its budget and every reclaim flushed them, so the streams mapped afresh).
 * A map costs ~45 us and an unmap ~35 us per 2 MiB granule on the H200 (docs/benchmarks.md), so
 * placement prefers fully mapped blocks, then merges, and large runs (&ge; {@code LARGE_RUN_BYTES})
 * live in chunks of their own. Waiting on another stream's fence costs more than a map (it serialises
 * the two streams on the device), so a block the stream need not wait for comes next, mapped where
 * it is not; then a fenced mapped block; then the block with the most mapped units. Near the cap,
 * where a map would set off the staged recovery, the fenced mapped block comes before the blocks
 * that need mapping; with {@link PoolConfig#waitBeyondBudget()} it does so already beyond the budget.
 *
 * <h2>ON_DEMAND (without mapping)</h2>
 * Peak reserved / peak live was 3.78 with LAZY doubling and 256 MiB blocks. At the reservation's peak the excess sat in
 * three places: (a) blocks stranded in the 16 streams' local caches (1.4 x live), (b) free buddy
 * space in chunks that also hold live blocks, partly lazy steps grown far beyond the miss (1.4 x),
 * (c) empty buddy chunks kept while a &gt; maxBlock request took a new dedicated chunk (0.65 x,
 * global-only). ON_DEMAND answers each: (a) every miss flushes all caches before growing, and a
 * stream caches at most its share of 1/{@value #LOCAL_SHARE_DIVISOR} of the allocated bytes;
 * (b) growth adds one maxBlock-sized chunk, never a doubling step; (c) a new dedicated chunk first
 * replaces empty chunks. Spans let a large request use a warm-up chunk. The price is source
 * traffic: larger tensors get dedicated chunks of their own size (reused within 1/8 from a cache of
 * {@value #LARGE_CACHE_ENTRIES}), and empty chunks go back as soon as a miss needs room.
 *
 * <h2>Handles</h2>
 * Each {@link DeviceBlock} carries a packed {@code long} handle; bits 62..63 select the kind:
 * 00 buddy run or span ({@link BuddyLevel#handle}; a span's length exceeds maxBlock and it never
 * enters a local cache), 01 small object ({@link SmallObjects#handle}),
 * 10 dedicated chunk (bits 0..21 chunk id). The local caches store these longs, so the hot path
 * allocates nothing but the {@code DeviceBlock}.
 *
 * <h2>Cross-stream safety</h2>
 * Memory moving from stream A to the global level (local overflow, trim, idle flush, every free in
 * GLOBAL_ONLY mode) gets a fence recorded on A, kept per unit of its chunk ({@link Chunk#addFence};
 * a small object's in its slab's {@link FenceSet}). A stream B taking a run is made to wait
 * (device-side) on the pending fences of other streams on exactly the run's units, which are then
 * cleared (B's own later fence implies them); completed fences are dropped. Fences were per chunk
 * until the third session: with MAPPED's 1 GiB address-space chunks every global allocation then
 * waited for the latest free of every other stream (H200 serving: ~8 waits per request), and a
 * budget reclaim found no chunk free of fences, so it flushed every cache instead of unmapping.
 * The global level is also opportunistic (as the driver's stream-ordered allocator is by default):
 * a run for B comes first from a block with no unfinished fence of another stream
 * ({@link BuddyLevel#allocate(int, AllocationStream)}), and a small object first from a slab with
 * none ({@link SmallObjects#take}); only when no such memory is free does B take fenced memory and
 * wait. Before memory is unmapped or a chunk goes back to the source, its fences are awaited on
 * the host.
 *
 * <h2>Concurrency</h2>
 * Local level: an owner word per stream (see {@link LocalCache}). Global level: one lock per buddy
 * order and one per small class (see {@link BuddyLevel}); merges hold two adjacent order locks,
 * chunk release holds all. Growth, recovery and chunk release are serialised by the grow lock, and
 * the source is called under it but outside every order lock. Lock order: grow lock, owner words,
 * order locks ascending / class locks, fence-set monitors (leaves). Nobody holding an owner word
 * takes the grow lock; recovery holds the grow lock and claims owner words to flush the caches.
 *
 * <h2>Housekeeping</h2>
 * Nothing runs in the background: the owner of the pool calls {@link #maintain()} periodically
 * (idle local classes, idle empty chunks and cached dedicated chunks go back) and {@link #trim()} on
 * demand. Freed dedicated chunks (above the maximum block) wait in a small cache (at most
 * {@value #LARGE_CACHE_ENTRIES}) for a request at most 1/8 smaller; a miss returns cached ones
 * first, so the cache does not raise the peak.
 *
 * <h2>Statistics</h2>
 * Never locked. Local hits and local frees are single-writer counters in each {@link LocalCache};
 * everything on the global path is a {@link LongAdder}; reserved bytes an {@link AtomicLong}.
 * Allocated bytes = sum of the caches' counters + the adders. The peak of allocated bytes is
 * sampled on every read, on every global allocation of at least maxBlock/8, on every global
 * allocation in GLOBAL_ONLY mode, and when a stream has taken more than 1/2^{@value #PEAK_LAG_SHIFT}
 * of the peak from the global level since its last sample (a sample reads one line of every
 * stream's cache, which limited scaling when every miss did it). Between samples the recorded peak
 * lags by at most the local hits since the last sample (at most the bytes held in local caches)
 * plus peak/2^{@value #PEAK_LAG_SHIFT} per stream; the reserved peak is exact. Allocation latency is
 * recorded for one allocation in {@value #LATENCY_SAMPLE_EVERY}, chosen at random, to keep the
 * clock off the common path.
 *
 * <h2>Shared cache lines</h2>
 * The local path of one stream writes only its own cache's padded arrays ({@link LocalCache}), the
 * block it returns and, for the sampled allocation in {@value #LATENCY_SAMPLE_EVERY}, one striped cell
 * of the latency histogram. Pool fields that every stream reads (configuration, cache table, share of
 * live bytes, coarse clock) are written rarely: the coarse clock at most once a millisecond
 * ({@link #advanceClock}), the share when it moved by more than 1/8 ({@link #samplePeak}).
 */
public final class DevicePool implements DeviceAllocator {

    static final long KIND_MASK = 3L << 62;
    static final long KIND_SMALL = Handles.KIND_SMALL;
    static final long KIND_DEDICATED = 2L << 62;
    static final int LATENCY_SAMPLE_EVERY = 16;
    /** A stream samples the allocated peak after taking peak / 2^this from the global level ({@link #samplePeak}). */
    static final int PEAK_LAG_SHIFT = 6;
    /** The coarse clock is written only when it moved by more than this; see {@link #advanceClock}. */
    static final long CLOCK_GRANULARITY_NANOS = 1_000_000;
    /** Freed dedicated chunks kept for reuse at most. */
    static final int LARGE_CACHE_ENTRIES = 32;

    /** MAPPED: the slack never falls below this many minimum blocks (small pools do not remap constantly). */
    static final int MAPPED_SLACK_FLOOR_UNITS = 8;
    /** MAPPED: runs of at least this size live in address-space chunks of their own (see {@link BuddyLevel}). */
    static final long LARGE_RUN_BYTES = 64L << 20;
    /**
     * MAPPED: large chunks map and unmap extents of this size, small chunks of {@link #SMALL_EXTENT_BYTES}
     * (one physical allocation each; the driver charges per allocation, ~80 us map + unmap on the H200).
     * BERT trace, 1000 / 2000 requests: 2 MiB everywhere 1.081 / 1.080 x peak live, 343 allocations per
     * request; 32 MiB large + 2 MiB small 1.081 / 1.117 x, 187 / 164; 32 + 4 MiB 1.099 / 1.139 x, 107 / 94
     * (too close to the 1.15 target). Extents that are partly in use cannot be unmapped.
     */
    static final long LARGE_EXTENT_BYTES = 32L << 20;
    static final long SMALL_EXTENT_BYTES = 2L << 20;
    /** MAPPED: an address-space chunk holds this many maximum blocks (spans of up to this size fit in one). */
    static final int ADDRESS_CHUNK_MAX_BLOCKS = 4;

    /** Under ON_DEMAND the local caches together hold at most 1/this of allocated bytes (plus the floor below). */
    static final int LOCAL_SHARE_DIVISOR = 8;
    /**
     * Under MAPPED the local caches together hold at most this many times the ON_DEMAND share, i.e.
     * half of the allocated bytes (plus the floor). With the full configured cap (256 MiB per stream,
     * 4 GiB over 16 streams against a budget slack of 1/16) the caches kept pushing the pool over its
     * mapped budget; each reclaim flushed them all and the streams then mapped afresh: 22 449 maps per
     * 1000 trace requests against 5 777 with this share, the same 1.081 x peak live, and a lower peak
     * when fences lag (2.36 x against 2.77 x at 1000 events). On the H200 it served 0.996 x cuda-async
     * against 0.987-0.991 x in two 3-round comparisons and 1.000 x in the final 2-round one; there the
     * maps stayed (about 5 000 per 20 s run) while cache flushes fell by a third and the local hit
     * ratio went from 90 % to 24 % (docs/benchmarks.md, fourth session).
     */
    static final int MAPPED_LOCAL_SHARE_FACTOR = 4;
    /** Floor of a stream's local cap under ON_DEMAND and MAPPED, in minimum blocks. */
    static final int LOCAL_MIN_UNITS = 4;

    private final ChunkSource source;
    /** The growth policy in effect: MAPPED falls back to ON_DEMAND on a source that cannot map. */
    private final GrowthPolicy policy;
    /** policy == MAPPED: buddy chunks are address space, {@link #reserved} counts mapped bytes. */
    private final boolean mapping;
    /** MAPPED: bytes of address space reserved (mapped or not). */
    private final AtomicLong addressSpace = new AtomicLong();
    /** MAPPED: the most bytes allocated at once since it was last reset by {@link #maintain()}; see {@link #mappedBudget}. */
    private final AtomicLong highWater = new AtomicLong();
    /** MAPPED: when {@link #highWater} last rose ({@link #coarseNanos} clock). */
    private volatile long highWaterRaisedNanos;
    private final LongAdder reclaims = new LongAdder();
    private final LongAdder maps = new LongAdder();
    private final LongAdder unmaps = new LongAdder();
    /** Host time inside the source's map and unmap calls (MAPPED): what growing and giving back costs. */
    private final LongAdder mapNanos = new LongAdder();
    private final LongAdder unmapNanos = new LongAdder();
    /** Device-side waits on other streams' fences inserted by the global level (plus {@link SmallObjects#crossStreamWaits}). */
    private final LongAdder crossStreamWaits = new LongAdder();
    /** allocated / (LOCAL_SHARE_DIVISOR * streams), refreshed by samplePeak; see {@link #localCapBytes}. */
    private volatile long liveShareBytes;
    private volatile PoolConfig config;
    private final long minBlock;
    private final int unitShift;
    private final long maxBlock;
    /** maxBlock in minimum blocks. */
    private final int maxUnits;
    /** Largest span a handle can describe (16-bit length in minimum blocks); larger requests get dedicated chunks. */
    private final long maxSpanBytes;
    private final SizeClasses classes;
    private final int smallCount;
    private final long largestSmall;
    private final long[] classBytes;
    private final ChunkTable chunks = new ChunkTable();
    private final BuddyLevel buddy;
    private final SmallObjects small;
    private volatile LocalCache[] caches = new LocalCache[0];
    private final Object cachesLock = new Object();
    private final Object tuneLock = new Object();
    private final ReentrantLock growLock = new ReentrantLock();
    /** Next lazy chunk size; guarded by growLock. */
    private long nextStep;
    /** Freed dedicated chunks kept for reuse, oldest first; guarded by its own monitor. */
    private final java.util.ArrayDeque<Chunk> largeFree = new java.util.ArrayDeque<>();
    private final Set<DeviceBlock> tracked = ConcurrentHashMap.newKeySet();
    /** trackAllocationSites, fixed at construction (not tunable). */
    private final boolean tracking;
    private volatile boolean closed;

    /** Coarse clock for local-cache idle stamps; see {@link LocalCache}. */
    volatile long coarseNanos = System.nanoTime();

    private final AtomicLong reserved = new AtomicLong();
    private final AtomicLong peakReserved = new AtomicLong();
    private final AtomicLong peakAllocated = new AtomicLong();
    private final LongAdder allocations = new LongAdder();
    private final LongAdder frees = new LongAdder();
    private final LongAdder allocatedBytes = new LongAdder();
    private final LongAdder allocatedRequested = new LongAdder();
    private final LongAdder freedBytes = new LongAdder();
    private final LongAdder freedRequested = new LongAdder();
    private final LongAdder globalHits = new LongAdder();
    private final LongAdder grows = new LongAdder();
    private final LongAdder trims = new LongAdder();
    private final LongAdder recoveries = new LongAdder();
    private final LongAdder failures = new LongAdder();
    private final Log2Histogram latency = new Log2Histogram();
    private final Metrics metrics = new Metrics();
    /** One owner object for all blocks (a method reference per block would allocate). */
    private final DeviceBlock.Owner owner = this::free;
    /** Counters of local caches that were detached, folded in so totals stay right. */
    private final LongAdder retiredLocalHits = new LongAdder();

    /**
     * Creates the pool; with EAGER or HYBRID growth reserves {@code initialBytes} at once.
     *
     * @throws OutOfDeviceMemoryException if the initial reservation is refused
     */
    public DevicePool(ChunkSource source, PoolConfig config) {
        this.source = Objects.requireNonNull(source, "source");
        this.config = Objects.requireNonNull(config, "config");
        this.tracking = config.trackAllocationSites();
        this.minBlock = config.minBlockBytes();
        this.unitShift = Long.numberOfTrailingZeros(minBlock);
        this.maxBlock = config.maxBlockBytes();
        this.classes = new SizeClasses(minBlock);
        this.mapping = config.growthPolicy() == GrowthPolicy.MAPPED && source.supportsMapping();
        this.policy = mapping || config.growthPolicy() != GrowthPolicy.MAPPED ? config.growthPolicy() : GrowthPolicy.ON_DEMAND;
        if (mapping && minBlock % source.mappingGranularity() != 0) {
            throw PoolConfig.invalid("minBlockBytes", minBlock, "a multiple of " + source.name()
                    + "'s mapping granularity (" + source.mappingGranularity() + " B) with growthPolicy MAPPED");
        }
        this.smallCount = classes.count();
        this.largestSmall = classes.size(smallCount - 1);
        int maxUnits = (int) (maxBlock >>> unitShift);
        this.maxUnits = maxUnits;
        this.maxSpanBytes = Math.min(Handles.LENGTH_MASK, Handles.MAX_CHUNK_UNITS) << unitShift;
        this.classBytes = new long[smallCount + maxUnits];
        for (int c = 0; c < classBytes.length; c++) {
            classBytes[c] = c < smallCount ? classes.size(c) : (long) (c - smallCount + 1) << unitShift;
        }
        this.buddy = new BuddyLevel(chunks, Long.numberOfTrailingZeros(maxUnits), config.coalesceThreshold(),
                mapping ? Math.max(2, (int) (LARGE_RUN_BYTES >>> unitShift)) : 0);
        this.small = new SmallObjects(classes);
        this.nextStep = config.growthStepBytes();
        if (config.growthPolicy() != GrowthPolicy.LAZY && config.initialBytes() > 0) {
            growLock.lock();
            try {
                grow(roundUp(config.initialBytes()));
            } finally {
                growLock.unlock();
            }
        }
    }

    // ------------------------------------------------------------------ allocate

    @Override
    public DeviceBlock allocate(long bytes, AllocationStream stream) {
        if (bytes <= 0) {
            throw new IllegalArgumentException("bytes = " + bytes + " is invalid; allowed: a positive size");
        }
        Objects.requireNonNull(stream, "stream");
        if (closed) {
            throw new IllegalStateException("pool on " + source.name() + " is closed");
        }
        boolean sampled = ThreadLocalRandom.current().nextInt(LATENCY_SAMPLE_EVERY) == 0;
        long start = sampled ? System.nanoTime() : 0;
        PoolConfig cfg = config;
        DeviceBlock block;
        int spanUnits = (int) ((bytes + minBlock - 1) >>> unitShift);
        long spanHandle = bytes > maxBlock && policy == GrowthPolicy.ON_DEMAND && bytes <= maxSpanBytes
                ? buddy.allocateSpan(spanUnits) : -1;
        if (bytes > maxBlock && mapping && bytes <= maxSpanBytes) {
            // exit 3 (MAPPED): a span in address space
            block = spanBlock(allocateRun(spanUnits, stream, bytes, null), spanUnits, bytes, stream);
        } else if (spanHandle >= 0) {
            waitForRun(spanHandle, stream, null);                  // exit 3: a span of adjacent free max blocks
            globalHits.increment();
            block = spanBlock(spanHandle, spanUnits, bytes, stream);
        } else if (bytes > maxBlock) {
            block = allocateDedicated(bytes, stream);
        } else {
            int c = bytes <= largestSmall ? classes.indexOf(bytes)
                    : smallCount + (int) ((bytes + minBlock - 1) >>> unitShift) - 1;
            long size = classBytes[c];
            long handle = 0;
            LocalCache cache = null;
            if (cfg.mode() == AllocatorMode.TWO_LEVEL) {
                cache = cacheFor(stream);
                handle = cache.pop(c, size, bytes, cfg);           // exit 1: local hit, no lock
            }
            if (handle == 0) {
                handle = allocateGlobal(c, stream, cache, cfg, bytes);   // exit 2: global level (may grow)
                allocations.increment();
                allocatedBytes.add(size);
                allocatedRequested.add(bytes);
                if (cache == null || size >= maxBlock >>> 3
                        || cache.addUnsampled(size, peakAllocated.get() >>> PEAK_LAG_SHIFT)) {
                    samplePeak();
                }
            }
            block = new DeviceBlock(owner, address(handle), size, bytes, stream, handle, site());
        }
        if (tracking) {
            tracked.add(block);
        }
        if (sampled) {
            latency.record(System.nanoTime() - start);
        }
        return block;
    }

    /** Counts a span of {@code units} minimum blocks handed out for {@code bytes} and wraps it in a block. */
    private DeviceBlock spanBlock(long handle, int units, long bytes, AllocationStream stream) {
        long size = (long) units << unitShift;
        allocations.increment();
        allocatedBytes.add(size);
        allocatedRequested.add(bytes);
        samplePeak();
        return new DeviceBlock(owner, address(handle), size, bytes, stream, handle, site());
    }

        private Throwable site() {
        return tracking ? new Throwable("allocation site") : null;
    }

    private long allocateGlobal(int c, AllocationStream stream, LocalCache cache, PoolConfig cfg, long requested) {
        advanceClock(System.nanoTime());
        if (c >= smallCount) {
            return allocateRun(c - smallCount + 1, stream, requested, null);
        }
        long[] one = null;
        while (true) {
            long handle;
            if (cache != null && (handle = cache.refillSmall(c, classBytes[c], small, cfg)) != 0) {
                globalHits.increment();
                return handle;
            }
            if (one == null) {
                one = new long[1];
            }
            if (small.take(c, one, 0, 1, stream) == 1) {
                globalHits.increment();
                return one[0];
            }
            FenceSet inherited = new FenceSet();                   // the run's fences, for every later taker
            long run = allocateRun(classes.slabBlocks(c), stream, requested, inherited);
            small.addSlab(c, run, address(run), inherited);
        }
    }

    /**
     * A buddy run of {@code units} minimum blocks for {@code stream}, growing or recovering if needed;
     * {@code requested} (the caller's bytes) is only for an out-of-memory message. The stream is
     * made to wait for the fences of the run's units; with {@code keep} they are also moved there.
     */
    private long allocateRun(int units, AllocationStream stream, long requested, FenceSet keep) {
        long handle = -1;
        if (mapping && units <= maxUnits) {
            // map before wait: a stream waiting on another's fence serialises the two on the device,
            // a map costs host time only (H200 serving: 97.7 -> 99.4 req/s, 5000 -> 26 waits)
            handle = buddy.allocate(units, stream, true);          // mapped, and B need not wait for it
            if (handle < 0 && units > 1) {
                buddy.coalesceAll();                               // freed runs lie in pieces until merged
                handle = buddy.allocate(units, stream, true);
            }
            long mapLimit = config.waitBeyondBudget() ? Math.min(mappedBudget(), capBytes()) : capBytes();
            if (handle < 0 && reserved.get() + ((long) units << unitShift) > mapLimit) {
                // no room to map under the cap (a wait beats a recovery) or, with waitBeyondBudget,
                // under the budget (a wait beats holding more memory)
                handle = buddy.allocate(units, null, true);
            }
            if (handle < 0 && units > 1) {
                handle = buddy.allocateMostMapped(units, stream);  // B need not wait; the least to map
            }
            if (handle < 0) {
                handle = buddy.allocate(units, stream);            // B need not wait; map all of it
            }
            if (handle < 0) {
                handle = buddy.allocate(units, null, true);        // mapped, B waits
            }
            if (handle < 0 && units > 1) {
                handle = buddy.allocateMostMapped(units, null);    // the fewest bytes to map
            }
        }
        if (handle < 0 && units <= maxUnits) {
            handle = buddy.allocate(units, stream);                // a block B need not wait for
        }
        if (handle < 0) {
            handle = tryAllocate(units);
        }
        if (handle < 0) {
            buddy.coalesceAll();                                   // deferred merge, then retry
            handle = tryAllocate(units);
        }
        if (handle >= 0) {
            globalHits.increment();
        } else {
            handle = growAndAllocate(units);
        }
        waitForRun(handle, stream, keep);
        if (mapping) {
            try {
                ensureMapped(handle, requested);
            } catch (RuntimeException e) {
                if (keep != null) {
                    keep.clear();
                }
                // the run's fences were moved out when the stream was made to wait on them: its own
                // fence now stands for them (a later taker waits for the earlier streams through it)
                returnToGlobal(stream, new long[] {handle}, 0, 1);
                throw e;
            }
        }
        return handle;
    }

    /**
     * Makes {@code stream} wait (device-side) for the other streams' unfinished work on the units of
     * run {@code handle}, which the caller now holds, and clears the units' fences: whatever the
     * stream later does with them is ordered after that work. With {@code keep} (a new slab) the
     * fences move there instead, so every later taker of the slab's objects waits for them too.
     */
    private void waitForRun(long handle, AllocationStream stream, FenceSet keep) {
        FenceSet fences = chunks.get(Handles.chunkId(handle))
                .takeFences(Handles.offset(handle), Handles.length(handle), keep);
        if (fences != null) {
            crossStreamWaits.add(fences.makeWait(stream));
            if (fences != keep) {
                fences.clear();
            }
        }
    }

    /** A run of at most one maximum block, or (ON_DEMAND) a span of adjacent maximum blocks. */
    private long tryAllocate(int units) {
        return units > maxUnits ? buddy.allocateSpan(units) : buddy.allocate(units);
    }

    private long growAndAllocate(int units) {
        long bytes = (long) units << unitShift;
        long blockBytes = units > maxUnits                        // a span: whole maximum blocks of one chunk
                ? (long) ((units + maxUnits - 1) / maxUnits) * maxBlock
                : minBlock << BuddyLevel.ceilLog2(units);          // a chunk must hold one block of the run's order
        growLock.lock();
        try {
            long handle = tryAllocate(units);                   // someone else may have grown
            if (handle >= 0) {
                return handle;
            }
            boolean onDemand = policy == GrowthPolicy.ON_DEMAND;
            boolean mapped = policy == GrowthPolicy.MAPPED;
            // reuse what the caches hold before growing; MAPPED grows address space, which costs no
            // memory, and flushes only once the address space is far beyond the cap
            if (mapped ? addressSpace.get() + bytes > 2 * capBytes() : onDemand || metrics.cachedBytes() >= bytes) {
                recover(false);
                handle = tryAllocate(units);
                if (handle >= 0) {
                    return handle;
                }
            }
            releaseLarge(bytes);                                  // idle dedicated chunks go before we grow
            if (onDemand) {
                releaseEmptyChunksBelow(blockBytes);             // too small for this request: give back, then grow
            }
            OutOfDeviceMemoryException refusal = null;
            if (onDemand || mapped) {
                try {
                    growFor(units, Math.max(blockBytes, mapped ? ADDRESS_CHUNK_MAX_BLOCKS * maxBlock : maxBlock));
                } catch (OutOfDeviceMemoryException e) {
                    refusal = e;
                }
                handle = tryAllocate(units);
                if (handle >= 0) {
                    return handle;
                }
            } else if (policy != GrowthPolicy.EAGER) {
                try {
                    growLazily(blockBytes);
                } catch (OutOfDeviceMemoryException e) {
                    refusal = e;
                }
                handle = tryAllocate(units);
                if (handle >= 0) {
                    return handle;
                }
            } else {
                refusal = new OutOfDeviceMemoryException(bytes, "growthPolicy EAGER does not grow");
            }
            recoveries.increment();                                // staged recovery, steps 1-4
            long recovered = recover(true);
            handle = tryAllocate(units);
            if (handle >= 0) {
                return handle;
            }
            // steps 5-6: grow by one block of the request's order; other streams allocate without the
            // grow lock and may take the new chunk first, hence a few attempts
            for (int attempt = 0; attempt < 3 && policy != GrowthPolicy.EAGER; attempt++) {
                try {
                    growFor(units, blockBytes);
                } catch (OutOfDeviceMemoryException e) {
                    refusal = e;
                    break;
                }
                handle = tryAllocate(units);
                if (handle >= 0) {
                    return handle;
                }
            }
            failures.increment();
            throw outOfMemory(bytes, recovered, refusal);
        } finally {
            growLock.unlock();
        }
    }

    /** Grows by the next lazy step (at least {@code needed}), falling back to {@code needed} alone. */
    private void growLazily(long needed) {
        long cap = capBytes();
        long step = Math.max(nextStep, needed);
        long room = (cap - reserved.get()) / minBlock * minBlock;
        if (step > room && room >= needed) {
            step = room;
        }
        try {
            grow(step);
        } catch (OutOfDeviceMemoryException e) {
            if (step == needed) {
                throw e;
            }
            grow(needed);
            return;
        }
        if (step >= nextStep) {
            nextStep = Math.min(nextStep * 2, config.maxGrowthStepBytes());
        }
    }

    /** Grows a chunk that serves runs of {@code units} (MAPPED keeps large and small runs apart). */
    private void growFor(int units, long bytes) {
        grow(bytes, units >= buddy.largeUnits && buddy.largeUnits > 0);
    }

    private void grow(long bytes) {
        grow(bytes, false);
    }

    /** Obtains one buddy chunk of {@code bytes} (a multiple of minBlock) within the cap; grow lock held. */
    private void grow(long bytes, boolean large) {
        bytes = Math.min(bytes, Handles.MAX_CHUNK_UNITS << unitShift);
        Chunk chunk;
        if (mapping) {                                             // address space only: no memory yet
            long extent = Math.max(minBlock, Math.min(maxBlock, LARGE_EXTENT_BYTES));
            long size = (bytes + extent - 1) / extent * extent;   // whole extents
            bytes = size;
            long address = source.reserveAddressSpace(bytes);
            addressSpace.addAndGet(bytes);
            chunk = chunks.add(id -> {
                Chunk c = new Chunk(id, address, size, size >>> unitShift, false, true);
                c.large = large;
                c.extentUnits = (int) Math.max(1, Math.min(maxUnits, (large ? LARGE_EXTENT_BYTES : SMALL_EXTENT_BYTES) >>> unitShift));
                return c;
            });
        } else {
            long size = bytes;
            long address = reserveFromSource(bytes);
            chunk = chunks.add(id -> new Chunk(id, address, size, size >>> unitShift, false));
        }
        buddy.addChunk(chunk);
        grows.increment();
    }

    /** Takes {@code bytes} of the cap and asks the source; rolls back on refusal. */
    private long reserveFromSource(long bytes) {
        takeCap(bytes);
        try {
            long address = source.allocate(bytes);
            Peaks.raise(peakReserved, reserved.get());
            return address;
        } catch (RuntimeException e) {
            reserved.addAndGet(-bytes);
            throw e;
        }
    }

    private long capBytes() {
        return config.effectiveCapBytes(source.capacityBytes());
    }

    /**
     * A request above the maximum block: reuse a freed dedicated chunk of at most 1/8 more, else
     * give cached chunks back until the request is covered (so the cache never raises the peak) and
     * ask the source for a chunk of exactly the rounded request.
     */
    private DeviceBlock allocateDedicated(long bytes, AllocationStream stream) {
        long size = roundUp(bytes);
        Chunk chunk = takeLarge(size);
        if (chunk != null) {
            FenceSet fences = chunk.takeFences(0, 1, null);
            if (fences != null) {
                crossStreamWaits.add(fences.makeWait(stream));
                fences.clear();
            }
            globalHits.increment();
        } else {
            if (policy == GrowthPolicy.ON_DEMAND) {
                releaseForDedicated(size);                         // free buddy chunks cannot serve it: give back
            } else {
                releaseLarge(size);
            }
            long address;
            try {
                address = reserveFromSource(size);
            } catch (OutOfDeviceMemoryException first) {
                address = recoverAndRetry(bytes, () -> reserveFromSource(size));
            }
            long base = address;
            chunk = chunks.add(id -> new Chunk(id, base, size, size >>> unitShift, true));
            grows.increment();
        }
        allocations.increment();
        allocatedBytes.add(chunk.bytes);
        allocatedRequested.add(bytes);
        samplePeak();
        return new DeviceBlock(owner, chunk.address, chunk.bytes, bytes, stream, KIND_DEDICATED | chunk.id, site());
    }

    /**
     * ON_DEMAND before a new dedicated chunk: flush the local caches, coalesce, and return every
     * empty buddy chunk and every cached dedicated chunk, so that the new chunk replaces memory
     * nobody uses instead of adding to it.
     */
    private void releaseForDedicated(long size) {
        growLock.lock();
        try {
            recover(false);
            releaseEmptyChunksBelow(Long.MAX_VALUE);
            releaseLarge(size);
        } finally {
            growLock.unlock();
        }
    }

    private Chunk takeLarge(long size) {
        synchronized (largeFree) {
            Chunk best = null;
            for (Chunk chunk : largeFree) {
                if (chunk.bytes >= size && chunk.bytes - size <= size >>> 3
                        && (best == null || chunk.bytes < best.bytes)) {
                    best = chunk;
                }
            }
            if (best != null) {
                largeFree.remove(best);
                best.idleDedicated = false;
            }
            return best;
        }
    }

    /**
     * Returns cached dedicated chunks to the source, oldest first, until {@code bytes} were returned
     * (Long.MAX_VALUE: all), skipping those idle for less than {@code minIdleNanos}.
     */
    private long releaseLarge(long bytes, long minIdleNanos, long keepReserved) {
        List<Chunk> victims = new ArrayList<>();
        long total = 0;
        long now = System.nanoTime();
        synchronized (largeFree) {
            for (var it = largeFree.iterator(); it.hasNext() && total < bytes; ) {
                Chunk chunk = it.next();
                if (now - chunk.emptySinceNanos >= minIdleNanos && reserved.get() - total - chunk.bytes >= keepReserved) {
                    it.remove();
                    victims.add(chunk);
                    total += chunk.bytes;
                }
            }
        }
        victims.forEach(this::releaseChunk);
        return total;
    }

    private long releaseLarge(long bytes) {
        return releaseLarge(bytes, 0, 0);
    }

    private long roundUp(long bytes) {
        return (bytes + minBlock - 1) & -minBlock;
    }

    long classBytes(int c) {
        return classBytes[c];
    }

    private int classOf(long handle) {
        return (handle & KIND_MASK) == KIND_SMALL ? Handles.sizeClass(handle)
                : smallCount + (int) Handles.length(handle) - 1;
    }

    private long address(long handle) {
        long kind = handle & KIND_MASK;
        if (kind == 0) {
            return chunks.get(Handles.chunkId(handle)).address + (Handles.offset(handle) << unitShift);
        }
        if (kind == KIND_SMALL) {
            return small.address(handle);
        }
        return chunks.get((int) (handle & (Handles.MAX_CHUNKS - 1))).address;
    }

    // ------------------------------------------------------------------ free

    private void free(DeviceBlock block) {
        if (tracking) {
            tracked.remove(block);
        }
        if (closed) {
            return;                                                // its chunk already went back at close
        }
        long handle = block.handle();
        AllocationStream stream = block.stream();
        if ((handle & KIND_MASK) == KIND_DEDICATED) {
            freeDedicated(block, stream);
            return;
        }
        PoolConfig cfg = config;
        boolean span = (handle & KIND_MASK) == 0 && Handles.length(handle) > maxUnits;
        int c = span ? -1 : classOf(handle);
        if (!span && cfg.mode() == AllocatorMode.TWO_LEVEL
                && cacheFor(stream).push(c, handle, block.size(), block.requestedBytes(), cfg)) {
            return;                                                // exit 1: kept in the stream's cache
        }
        frees.increment();                                         // exit 2: back to the global level
        freedBytes.add(block.size());
        freedRequested.add(block.requestedBytes());
        returnToGlobal(stream, new long[] {handle}, 0, 1);
    }

    private void freeDedicated(DeviceBlock block, AllocationStream stream) {
        frees.increment();
        freedBytes.add(block.size());
        freedRequested.add(block.requestedBytes());
        Chunk chunk = chunks.get((int) (block.handle() & (Handles.MAX_CHUNKS - 1)));
        StreamFence recorded = stream.recordFence();
        if (recorded.isComplete()) {
            recorded.close();
        } else {
            FenceSet.Shared fence = new FenceSet.Shared(recorded, stream.ordinal());
            chunk.addFence(0, 1, fence);
            fence.release();
        }
        Chunk evicted = null;
        synchronized (largeFree) {
            chunk.emptySinceNanos = System.nanoTime();
            chunk.idleDedicated = true;
            largeFree.addLast(chunk);
            if (largeFree.size() > LARGE_CACHE_ENTRIES) {
                evicted = largeFree.removeFirst();
            }
        }
        if (evicted != null) {
            releaseChunk(evicted);
        }
    }

    /** Frees handles from {@code stream} into the global level under one fence recorded on the stream. */
    void returnToGlobal(AllocationStream stream, long[] handles, int from, int to) {
        StreamFence recorded = stream.recordFence();
        FenceSet.Shared fence = null;
        if (recorded.isComplete()) {
            recorded.close();                                      // nothing queued: no one needs to wait
        } else {
            fence = new FenceSet.Shared(recorded, stream.ordinal());
        }
        List<SmallObjects.Slab> released = null;
        try {
            for (int i = from; i < to; i++) {
                long handle = handles[i];
                if ((handle & KIND_MASK) == KIND_SMALL) {
                    if (released == null) {
                        released = new ArrayList<>();
                    }
                    small.giveBack(handles, i, i + 1, fence, released);
                } else {
                    if (fence != null) {
                        chunks.get(Handles.chunkId(handle))
                                .addFence(Handles.offset(handle), Handles.length(handle), fence);
                    }
                    buddy.free(handle);
                }
            }
        } finally {
            if (fence != null) {
                fence.release();
            }
        }
        if (released != null) {
            released.forEach(this::returnSlab);
        }
    }

    private void returnSlab(SmallObjects.Slab slab) {
        Chunk chunk = chunks.get(Handles.chunkId(slab.runHandle));
        chunk.putFences(Handles.offset(slab.runHandle), Handles.length(slab.runHandle), slab.fences);
        slab.fences.clear();
        buddy.free(slab.runHandle);
    }

    // ------------------------------------------------------------------ local caches

    private LocalCache cacheFor(AllocationStream stream) {
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
        synchronized (cachesLock) {
            LocalCache[] current = caches;
            if (ordinal < current.length && current[ordinal] != null && current[ordinal].stream == stream) {
                return current[ordinal];
            }
            LocalCache[] next = Arrays.copyOf(current, Math.max(current.length, ordinal + 1));
            replaced = next[ordinal];
            cache = new LocalCache(this, stream, classBytes.length);
            next[ordinal] = cache;
            caches = next;
        }
        if (replaced != null) {
            retire(replaced);                                      // a new stream reuses the ordinal
        }
        return cache;
    }

    /** Moves everything cached for {@code stream} to the global level; call when the stream is destroyed. */
    public void detachStream(AllocationStream stream) {
        LocalCache removed = null;
        synchronized (cachesLock) {
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

    /**
     * Flushes a cache that left the table and folds its counters into the pool's adders. The cache
     * stays claimed for good, so a thread still holding it goes to the global level.
     */
    private void retire(LocalCache cache) {
        cache.retire();
        long hits = cache.stat(LocalCache.HITS);
        retiredLocalHits.add(hits);
        allocations.add(hits);
        allocatedBytes.add(cache.stat(LocalCache.ALLOC_BYTES));
        allocatedRequested.add(cache.stat(LocalCache.ALLOC_REQUESTED));
        frees.add(cache.stat(LocalCache.FREES));
        freedBytes.add(cache.stat(LocalCache.FREE_BYTES));
        freedRequested.add(cache.stat(LocalCache.FREE_REQUESTED));
    }

    // ------------------------------------------------------------------ trim, recovery, release

    /**
     * Staged recovery and trim: flush every local cache, release empty slabs, coalesce; with
     * {@code releaseChunks}, also return every empty chunk and finished dedicated chunk. Grow lock held.
     *
     * @return bytes returned to the source
     */
    private long recover(boolean releaseChunks) {
        for (LocalCache cache : caches) {
            if (cache != null && cache.flushAll() > 0) {
                trims.increment();
            }
        }
        List<SmallObjects.Slab> slabs = new ArrayList<>();
        small.releaseEmpty(slabs);
        slabs.forEach(this::returnSlab);
        buddy.coalesceAll();
        if (!releaseChunks) {
            return 0;
        }
        long released = releaseEmptyChunks(true) + releaseLarge(Long.MAX_VALUE);
        return mapping ? released + reclaimMapped(0, false, true) : released;
    }

    /**
     * Empties every local cache, coalesces the global level and returns every empty chunk to the
     * source (waiting for the streams that last used it).
     *
     * @return bytes returned to the source
     */
    public long trim() {
        growLock.lock();
        try {
            return closed ? 0 : recover(true);
        } finally {
            growLock.unlock();
        }
    }

    /**
     * Periodic housekeeping (the server calls it every second or so): flushes local size classes idle
     * beyond {@code localIdleAge}, returns finished dedicated chunks, and returns chunks empty for longer
     * than {@code releaseIdleAge} while reserved bytes stay at or above {@code releaseThresholdBytes}.
     *
     * @return bytes returned to the source
     */
    public long maintain() {
        if (closed) {
            return 0;
        }
        long now = System.nanoTime();
        coarseNanos = now;
        long idle = config.localIdleAge().toNanos();
        for (LocalCache cache : caches) {
            if (cache != null) {
                cache.flushIdleNow(idle);
            }
        }
        PoolConfig cfg = config;
        long released = releaseLarge(Long.MAX_VALUE, cfg.releaseIdleAge().toNanos(), cfg.releaseThresholdBytes());
        growLock.lock();
        try {
            released += releaseEmptyChunks(false);
            if (mapping && now - highWaterRaisedNanos >= cfg.releaseIdleAge().toNanos()) {
                highWater.set(metrics.allocatedBytes());            // demand fell: the budget follows it
                highWaterRaisedNanos = now;
                released += reclaimMapped(Math.max(cfg.releaseThresholdBytes(), mappedBudget()), true, false);
            }
            return released;
        } finally {
            growLock.unlock();
        }
    }

    /** Returns every empty buddy chunk smaller than {@code bytes} at once (ON_DEMAND, before growing). */
    private long releaseEmptyChunksBelow(long bytes) {
        long released = 0;
        for (Chunk chunk : chunks.all()) {
            if (!chunk.dedicated && chunk.bytes < bytes && chunk.liveUnits.get() == 0 && buddy.detachIfEmpty(chunk)) {
                released += releaseChunk(chunk);
            }
        }
        return released;
    }

    private long releaseEmptyChunks(boolean force) {
        long released = 0;
        long now = System.nanoTime();
        PoolConfig cfg = config;
        for (Chunk chunk : chunks.all()) {
            if (chunk.dedicated || chunk.liveUnits.get() != 0) {
                continue;
            }
            if (!force && (now - chunk.emptySinceNanos < cfg.releaseIdleAge().toNanos()
                    || reserved.get() - chunk.bytes < cfg.releaseThresholdBytes())) {
                continue;
            }
            if (buddy.detachIfEmpty(chunk)) {
                released += releaseChunk(chunk);
            }
        }
        return released;
    }

    /**
     * Returns a detached chunk to the source after its fences completed.
     *
     * @return bytes of memory given back (an address-space chunk: what was mapped in it)
     */
    private long releaseChunk(Chunk chunk) {
        chunks.remove(chunk);
        chunk.awaitAllFences();
        long released;
        if (chunk.isAddressSpace()) {
            released = unmapUnits(chunk, 0, chunk.units);
            source.releaseAddressSpace(chunk.address, chunk.bytes);
            addressSpace.addAndGet(-chunk.bytes);
        } else {
            source.free(chunk.address, chunk.bytes);
            reserved.addAndGet(-chunk.bytes);
            released = chunk.bytes;
        }
        trims.increment();
        return released;
    }

    // ------------------------------------------------------------------ MAPPED: map and unmap

    /*
     * MAPPED growth in one picture (one address-space chunk of 4 maximum blocks; # mapped, . not):
     *
     *   |####|####|##..|....|....|....|####|#...|   units of 2 MiB
     *    live run   ^tail freed,     free block,   free, mapped: counted as slack
     *               still mapped     never mapped
     *
     * 1. A run taken from the buddy level (allocateRun) is mapped where it is not yet: ensureMapped
     *    walks the chunk's bitmap and maps each unmapped stretch with one source call.
     * 2. Before mapping, makeRoomToMap takes the bytes from the cap and checks the slack: when free
     *    mapped memory at the global level (reserved - allocated - cached in local caches) exceeds
     *    allocated x mappedSlack (at least MAPPED_SLACK_FLOOR_UNITS minimum blocks), the
     *    reclaimer unmaps free mapped memory down to half the slack.
     * 3. reclaimMapped takes free blocks with mapped units out of the lists (BuddyLevel.takeMapped:
     *    large blocks, high addresses first; blocks without unfinished fences first), waits for the
     *    fences of the units it must (host side), unmaps their mapped stretches and frees them back.
     *    Blocks in local caches and in small-object slabs stay mapped; they have their own bounds.
     * 4. A refused map (device or cap) runs the staged recovery (flush caches, coalesce, unmap all
     *    free memory, release empty chunks) and retries once; then the run goes back and the caller
     *    gets the out-of-memory exception.
     */

    /** Maps every unmapped unit of a run the caller holds (in a large chunk: every extent it touches). */
    private void ensureMapped(long handle, long requested) {
        Chunk chunk = chunks.get(Handles.chunkId(handle));
        long to = Handles.offset(handle) + Handles.length(handle);
        long position = Handles.offset(handle);
        int extent = chunk.extentUnits;
        if (extent > 1) {
            long from = position / extent * extent;
            long end = Math.min(chunk.units, (to + extent - 1) / extent * extent);
            synchronized (chunk.extentLock) {                      // a neighbour run may share an end extent
                mapStretches(chunk, from, end, (long) extent << unitShift, requested);
            }
            return;
        }
        mapStretches(chunk, position, to, 0, requested);
    }

    /** Maps each unmapped stretch of [position, to), in extents of {@code extentBytes} (0: granules). */
    private void mapStretches(Chunk chunk, long position, long to, long extentBytes, long requested) {
        forEachStretch(chunk, position, to, false, (start, end) -> mapUnits(chunk, start, end, extentBytes, requested));
    }

    /** What to do with one stretch [start, end) of units found by {@link #forEachStretch}. */
    @FunctionalInterface
    private interface StretchAction {
        void apply(long start, long end);
    }

    /**
     * Calls {@code action} for each maximal stretch of [from, to) whose units are mapped (or, with
     * {@code mapped} false, unmapped), lowest first. The caller holds the units; the bitmap monitor is
     * taken only to read it, so the action may call the source.
     */
    private static void forEachStretch(Chunk chunk, long from, long to, boolean mapped, StretchAction action) {
        long position = from;
        while (position < to) {
            long start;
            long end;
            synchronized (chunk.mapped) {
                start = chunk.nextUnit(position, to, mapped);
                end = chunk.nextUnit(start, to, !mapped);
            }
            if (start >= to) {
                return;
            }
            action.apply(start, end);
            position = end;
        }
    }

    private void mapUnits(Chunk chunk, long start, long end, long extentBytes, long requested) {
        long bytes = (end - start) << unitShift;
        long address = chunk.address + (start << unitShift);
        makeRoomToMap(bytes, requested);
        try {
            mapAt(address, bytes, extentBytes);
        } catch (OutOfDeviceMemoryException refused) {
            reserved.addAndGet(-bytes);
            recoverAndRetry(requested, () -> {
                takeCap(bytes);
                try {
                    mapAt(address, bytes, extentBytes);
                } catch (OutOfDeviceMemoryException again) {
                    reserved.addAndGet(-bytes);
                    throw again;
                }
                return null;
            });
        }
        synchronized (chunk.mapped) {
            chunk.markMapped(start, end, true);
        }
        maps.increment();
        Peaks.raise(peakReserved, reserved.get());
    }

    /**
     * Takes {@code bytes} of the cap for a map (step 2 of the picture). The budget is the high-water
     * mark of allocated bytes plus {@link PoolConfig#mappedSlack()} of it: while mapping stays within it,
     * free mapped memory is left alone (it is reused by later requests at no cost); beyond it, free
     * mapped memory of the global level is unmapped first, then the caches are flushed if needed.
     */
    private void makeRoomToMap(long bytes, long requested) {
        long allocatedAfter = metrics.allocatedBytes() + bytes;
        if (Peaks.raise(highWater, allocatedAfter)) {
            highWaterRaisedNanos = coarseNanos;
        }
        long budget = mappedBudget();
        if (reserved.get() + bytes > budget) {
            growLock.lock();
            try {
                long slack = budget - highWater.get();               // hysteresis: a quarter of the slack below
                reclaimMapped(budget - bytes - slack / 4, true, false);
            } finally {
                growLock.unlock();
            }
        }
        try {
            takeCap(bytes);
        } catch (OutOfDeviceMemoryException atCap) {
            recoverAndRetry(requested, () -> {
                takeCap(bytes);
                return null;
            });
        }
    }

    /**
     * After a refusal (the source, the cap or a map): the staged recovery under the grow lock, then
     * {@code retry} once. A second refusal counts as a failure and becomes the out-of-memory
     * exception for {@code requested} bytes, naming what the recovery freed.
     */
    private <T> T recoverAndRetry(long requested, Supplier<T> retry) {
        growLock.lock();
        try {
            recoveries.increment();
            long recovered = recover(true);
            try {
                return retry.get();
            } catch (OutOfDeviceMemoryException again) {
                failures.increment();
                throw outOfMemory(requested, recovered, again);
            }
        } finally {
            growLock.unlock();
        }
    }

    private void mapAt(long address, long bytes, long extentBytes) {
        long started = System.nanoTime();
        try {
            if (extentBytes > 0) {
                source.map(address, bytes, extentBytes);
            } else {
                source.map(address, bytes);
            }
        } finally {
            mapNanos.add(System.nanoTime() - started);
        }
    }

    /**
     * Adds {@code bytes} to the reserved bytes if the cap allows (lock-free); the caller then obtains
     * them from the source (a chunk, or a map) or gives them back.
     */
    private void takeCap(long bytes) {
        long cap = capBytes();
        while (true) {
            long current = reserved.get();
            if (current + bytes > cap) {
                throw new OutOfDeviceMemoryException(bytes, "the pool's cap of " + format(cap) + " would be exceeded ("
                        + format(current) + " reserved, " + format(bytes) + " more asked)");
            }
            if (reserved.compareAndSet(current, current + bytes)) {
                return;
            }
        }
    }

    /**
     * Mapped memory in the buddy free lists: per address-space chunk, mapped units minus units outside
     * the free lists (runs handed out or cached, slabs; all of those are mapped). Racy, a few chunks to read.
     */
    private long freeMappedBytes() {
        long units = 0;
        for (Chunk chunk : chunks.all()) {
            if (chunk.isAddressSpace()) {
                units += Math.max(0, chunk.mappedUnits - chunk.liveUnits.get());
            }
        }
        return units << unitShift;
    }

    /** Mapped bytes the pool may hold: the allocated high-water mark plus the slack (at least the floor). */
    private long mappedBudget() {
        long mark = highWater.get();
        return mark + Math.max(MAPPED_SLACK_FLOOR_UNITS * minBlock, (long) (mark * config.mappedSlack()));
    }

    /**
     * Unmaps free mapped memory of the global level until reserved bytes are at most {@code target}
     * (step 3 of the picture): first blocks whose units have no unfinished fence; with
     * {@code flushCaches}, then the local caches and empty slabs go back to the global level and
     * it continues with such blocks; with {@code waitForFences} (trim, out-of-memory recovery),
     * last any block, waiting on the host for the fences of its units. A reclaim for the budget
     * never waits: the budget is a target, the cap is the limit. Grow lock held.
     *
     * @return bytes unmapped
     */
    private long reclaimMapped(long target, boolean flushCaches, boolean waitForFences) {
        List<SmallObjects.Slab> slabs = new ArrayList<>();        // empty slabs first become free runs
        small.releaseEmpty(slabs);
        slabs.forEach(this::returnSlab);
        long unmapped = 0;
        for (int pass = 0; pass < 3; pass++) {
            long excess = reserved.get() - Math.max(0, target);
            if (excess <= 0) {
                break;
            }
            if (pass == 1) {
                if (!flushCaches) {
                    continue;
                }
                recover(false);                                    // caches and empty slabs back, coalesce
                excess = reserved.get() - Math.max(0, target);
            } else if (pass == 2 && !waitForFences) {
                break;
            }
            unmapped += unmapTaken(buddy.takeMapped((excess + minBlock - 1) >>> unitShift, pass < 2));
        }
        if (unmapped > 0) {
            reclaims.increment();
        }
        return unmapped;
    }

    private long unmapTaken(long[] handles) {
        long unmapped = 0;
        for (long handle : handles) {
            Chunk chunk = chunks.get(Handles.chunkId(handle));
            long from = Handles.offset(handle);
            chunk.awaitFences(from, Handles.length(handle));   // a stream may still use these units
            unmapped += unmapUnits(chunk, from, from + Handles.length(handle));
            buddy.free(handle);
        }
        return unmapped;
    }

    /** Unmaps the mapped stretches of [from, to) of a chunk whose units the caller holds; returns bytes unmapped. */
    private long unmapUnits(Chunk chunk, long from, long to) {
        long[] unmapped = {0};
        forEachStretch(chunk, from, to, true, (start, end) -> {
            long bytes = (end - start) << unitShift;
            long started = System.nanoTime();
            source.unmap(chunk.address + (start << unitShift), bytes);
            unmapNanos.add(System.nanoTime() - started);
            synchronized (chunk.mapped) {
                chunk.markMapped(start, end, false);
            }
            reserved.addAndGet(-bytes);
            unmaps.increment();
            unmapped[0] += bytes;
        });
        return unmapped[0];
    }

    /**
     * Makes sure at least {@code bytes} are reserved (warm-up sizing, e.g. 1.5 x the largest tensor),
     * growing by one chunk if needed and within the cap.
     *
     * @return bytes newly reserved (0 if enough was reserved already)
     * @throws OutOfDeviceMemoryException if the source or the cap refuses
     */
    public long reserve(long bytes) {
        if (bytes < 0) {
            throw new IllegalArgumentException("bytes = " + bytes + " is invalid; allowed: >= 0");
        }
        growLock.lock();
        try {
            long missing = bytes - (mapping ? addressSpace.get() : reserved.get());
            if (missing <= 0) {
                return 0;
            }
            long size = roundUp(missing);
            grow(size);
            return size;
        } finally {
            growLock.unlock();
        }
    }

    // ------------------------------------------------------------------ tuning, close

    /** The configuration in force (changes with {@link #tune}). */
    public PoolConfig config() {
        return config;
    }

    /**
     * Applies runtime changes; validated as a whole, so a rejected tuning changes nothing. Caches
     * see new caps on their next operation ({@link #trim()} applies them at once); a lower cap stops
     * growth but does not evict memory in use.
     *
     * @return the configuration now in force
     * @throws IllegalArgumentException naming the field, value and allowed range
     */
    public PoolConfig tune(PoolTuning tuning) {
        Objects.requireNonNull(tuning, "tuning");
        synchronized (tuneLock) {
            PoolConfig next = config.apply(tuning);
            buddy.setThreshold(next.coalesceThreshold());
            if (tuning.growthStepBytes() != null) {
                growLock.lock();
                try {
                    nextStep = next.growthStepBytes();
                    config = next;
                } finally {
                    growLock.unlock();
                }
            } else {
                config = next;
            }
            return next;
        }
    }

    @Override
    public AllocatorMode mode() {
        return config.mode();
    }

    @Override
    public PoolMetrics metrics() {
        return metrics;
    }

    /**
     * Returns all memory to the source (waiting for every fence). Blocks still outstanding are
     * reported in an {@link IllegalStateException} after the memory went back.
     */
    @Override
    public void close() {
        growLock.lock();
        String leaks;
        try {
            if (closed) {
                return;
            }
            recover(false);
            leaks = describeOutstanding();
            closed = true;
            synchronized (largeFree) {
                largeFree.clear();                                 // released with every chunk below
            }
            for (Chunk chunk : chunks.all()) {
                releaseChunk(chunk);
            }
        } finally {
            growLock.unlock();
        }
        if (leaks != null) {
            throw new IllegalStateException(leaks);
        }
    }

    private String describeOutstanding() {
        long blocks = metrics.counters().allocations() - metrics.counters().frees();
        if (blocks == 0) {
            return null;
        }
        StringBuilder text = new StringBuilder().append("pool on ").append(source.name()).append(" closed with ")
                .append(blocks).append(" block(s) outstanding, ").append(format(metrics.allocatedBytes()))
                .append(" (requested ").append(format(metrics.requestedBytes())).append(")");
        if (tracked.isEmpty()) {
            text.append("; stream unknown (set trackAllocationSites to record stream and allocation site):");
            describeByScan(text);
        }
        for (DeviceBlock block : tracked) {
            text.append("\n  ").append(block.size()).append(" B (").append(format(block.size())).append(", requested ")
                    .append(block.requestedBytes()).append(" B) on stream ").append(block.stream().ordinal())
                    .append(" at 0x").append(Long.toHexString(block.address()));
            if (block.allocationSite() != null) {
                for (StackTraceElement frame : block.allocationSite().getStackTrace()) {
                    String owner = frame.getClassName();
                    if (!owner.equals(DevicePool.class.getName()) && !owner.startsWith(DevicePool.class.getName() + "$")) {
                        text.append("\n      allocated at ").append(frame);
                        break;
                    }
                }
            }
        }
        return text.toString();
    }

    /**
     * Lists outstanding memory without a registry (caches already flushed): small objects from the
     * slab bitmaps, buddy runs as the gaps between free blocks and slabs of each chunk (adjacent
     * outstanding runs show as one), dedicated chunks whole.
     */
    private void describeByScan(StringBuilder text) {
        int[] listed = {0};
        int limit = 32;
        java.util.function.BiConsumer<Long, Long> line = (address, size) -> {
            if (listed[0]++ < limit) {
                text.append("\n  ").append(size).append(" B (").append(format(size)).append(") at 0x")
                        .append(Long.toHexString(address));
            }
        };
        java.util.Map<Integer, List<long[]>> busy = new java.util.HashMap<>();
        small.forEachTaken(line, run -> busy.computeIfAbsent(Handles.chunkId(run), id -> new ArrayList<>())
                .add(new long[] {Handles.offset(run), Handles.length(run)}));
        long[][] free = buddy.snapshotFree();
        for (int k = 0; k < free.length; k++) {
            for (long key : free[k]) {
                busy.computeIfAbsent(Handles.keyChunk(key), id -> new ArrayList<>())
                        .add(new long[] {Handles.keyOffset(key), 1L << k});
            }
        }
        for (Chunk chunk : chunks.all()) {
            if (chunk.dedicated) {
                if (!chunk.idleDedicated) {
                    line.accept(chunk.address, chunk.bytes);
                }
                continue;
            }
            List<long[]> covered = busy.getOrDefault(chunk.id, new ArrayList<>());
            covered.sort(java.util.Comparator.comparingLong(r -> r[0]));
            long position = 0;
            for (long[] range : covered) {
                if (range[0] > position) {
                    line.accept(chunk.address + (position << unitShift), (range[0] - position) << unitShift);
                }
                position = Math.max(position, range[0] + range[1]);
            }
            if (position < chunk.units) {
                line.accept(chunk.address + (position << unitShift), (chunk.units - position) << unitShift);
            }
        }
        if (listed[0] > limit) {
            text.append("\n  ... and ").append(listed[0] - limit).append(" more");
        }
    }

    private OutOfDeviceMemoryException outOfMemory(long requested, long recovered, OutOfDeviceMemoryException cause) {
        long largest = metrics.largestFreeBlockBytes();
        String message = String.format(Locale.ROOT,
                "Out of device memory on %s: tried to allocate %s. Reserved %s of a cap of %s (device capacity %s); "
                        + "allocated %s (requested %s); cached in local caches %s; free in the global pool %s, "
                        + "largest free block %s, fragmentation %.2f. Recovery (flush local caches, coalesce, "
                        + "release empty chunks) returned %s to the device. %s",
                source.name(), format(requested), format(reserved.get()), format(capBytes()),
                format(source.capacityBytes()), format(metrics.allocatedBytes()), format(metrics.requestedBytes()),
                format(metrics.cachedBytes()), format(metrics.globalFreeBytes()), format(largest),
                metrics.fragmentation(), format(recovered),
                cause == null ? "" : "Last refusal: " + cause.getMessage());
        return new OutOfDeviceMemoryException(requested, message, cause);
    }

    static String format(long bytes) {
        if (bytes < 1024) {
            return bytes + " B";
        }
        String[] units = {"KiB", "MiB", "GiB", "TiB"};
        double value = bytes;
        int unit = -1;
        while (value >= 1024 && unit < units.length - 1) {
            value /= 1024;
            unit++;
        }
        return String.format(Locale.ROOT, "%.2f %s", value, units[unit]);
    }

    /**
     * Raises the allocated peak to the bytes allocated now and refreshes the stream share behind
     * {@link #localCapBytes}. Reads every cache's two allocation counters (one line per cache, which
     * its owner keeps writing), so {@link #allocate} calls it on every allocation of at least maxBlock/8
     * and above maxBlock, on every global allocation in GLOBAL_ONLY mode, and otherwise once a stream
     * took more than peak/2^{@value #PEAK_LAG_SHIFT} bytes from the global level since its last sample
     * ({@link LocalCache#addUnsampled}; no randomness, so replays stay deterministic). The share is
     * written only when it moved by more than 1/8: every stream reads it on every local free.
     */
    private void samplePeak() {
        LocalCache[] current = caches;
        long allocated = allocatedBytes.sum() - freedBytes.sum();
        for (LocalCache cache : current) {
            if (cache != null) {
                allocated += cache.stat(LocalCache.ALLOC_BYTES) - cache.stat(LocalCache.FREE_BYTES);
            }
        }
        Peaks.raise(peakAllocated, allocated);
        long share = allocated / (LOCAL_SHARE_DIVISOR * Math.max(1, current.length));
        long previous = liveShareBytes;
        if (Math.abs(share - previous) > previous >>> 3) {
            liveShareBytes = share;
        }
    }

    /**
     * Moves the coarse clock ({@link LocalCache}'s idle stamps) to {@code now} if it is more than
     * {@value #CLOCK_GRANULARITY_NANOS} ns behind: the field sits among fields every allocation reads,
     * so writing it on every global operation of sixteen streams would keep invalidating their line.
     */
    void advanceClock(long now) {
        if (now - coarseNanos > CLOCK_GRANULARITY_NANOS) {
            coarseNanos = now;
        }
    }

    /**
     * The bytes cap of one stream's local cache now: localCacheBytesPerStream, lowered under
     * ON_DEMAND growth to a share of the pool's allocated bytes (1/{@value #LOCAL_SHARE_DIVISOR}
     * of them spread over the streams, at least {@value #LOCAL_MIN_UNITS} minimum blocks), and under
     * MAPPED growth to {@value #MAPPED_LOCAL_SHARE_FACTOR} times that share (half of the allocated
     * bytes), so that the caches together never strand more than a fixed fraction of live memory.
     * Refreshed when the peak is sampled (a plain volatile read on the hot path).
     */
    long localCapBytes(PoolConfig cfg) {
        long fixed = cfg.localCacheBytesPerStream();
        long share = switch (policy) {
            case ON_DEMAND -> liveShareBytes;
            case MAPPED -> liveShareBytes * MAPPED_LOCAL_SHARE_FACTOR;
            default -> fixed;                                      // LAZY, EAGER, HYBRID: the configured cap
        };
        return Math.min(fixed, Math.max(LOCAL_MIN_UNITS * minBlock, share));
    }

    /** Flushes every local cache, releases empty slabs and coalesces, returning nothing to the source (tests). */
    void flushAndCoalesce() {
        growLock.lock();
        try {
            recover(false);
        } finally {
            growLock.unlock();
        }
    }

    /** Free blocks per order as keys {@code (chunkId << 24) | offset}, for tests. */
    long[][] freeListSnapshot() {
        return buddy.snapshotFree();
    }

    long minBlockBytes() {
        return minBlock;
    }

    // ------------------------------------------------------------------ metrics

    private final class Metrics implements PoolMetrics, BlockLayoutMetric {

        /** The buddy map for operators; see {@link BlockLayouts} (no lock taken, a racy picture). */
        @Override
        public List<ChunkBlocks> layout() {
            return BlockLayouts.layout(chunks.all(), buddy, caches, small, smallCount, unitShift);
        }

        private long sumCaches(int stat) {
            long total = 0;
            for (LocalCache cache : caches) {
                if (cache != null) {
                    total += cache.stat(stat);
                }
            }
            return total;
        }

        @Override
        public String name() {
            return source.name();
        }

        @Override
        public AllocatorMode mode() {
            return config.mode();
        }

        @Override
        public long reservedBytes() {
            return reserved.get();
        }

        @Override
        public long allocatedBytes() {
            return sumCaches(LocalCache.ALLOC_BYTES) - sumCaches(LocalCache.FREE_BYTES)
                    + allocatedBytes.sum() - freedBytes.sum();
        }

        @Override
        public long requestedBytes() {
            return sumCaches(LocalCache.ALLOC_REQUESTED) - sumCaches(LocalCache.FREE_REQUESTED)
                    + allocatedRequested.sum() - freedRequested.sum();
        }

        @Override
        public long peakReservedBytes() {
            return peakReserved.get();
        }

        @Override
        public long peakAllocatedBytes() {
            Peaks.raise(peakAllocated, allocatedBytes());
            return peakAllocated.get();
        }

        @Override
        public void resetPeaks() {
            peakReserved.set(reserved.get());
            peakAllocated.set(allocatedBytes());
        }

        @Override
        public AllocatorCounters counters() {
            long localHits = sumCaches(LocalCache.HITS);
            return new AllocatorCounters(localHits + allocations.sum(), sumCaches(LocalCache.FREES) + frees.sum(),
                    localHits + retiredLocalHits.sum(), globalHits.sum(), grows.sum(), trims.sum(),
                    buddy.coalesces.sum(), recoveries.sum(), failures.sum());
        }

        @Override
        public LatencyDistribution allocationLatency() {
            return latency;
        }

        @Override
        public long cachedBytes() {
            return sumCaches(LocalCache.CACHED_BYTES);
        }

        @Override
        public long addressSpaceBytes() {
            return addressSpace.get();
        }

        @Override
        public long mapCalls() {
            return maps.sum();
        }

        @Override
        public long unmapCalls() {
            return unmaps.sum();
        }

        @Override
        public long mapNanos() {
            return mapNanos.sum();
        }

        @Override
        public long unmapNanos() {
            return unmapNanos.sum();
        }

        @Override
        public long crossStreamWaits() {
            return crossStreamWaits.sum() + small.crossStreamWaits.sum();
        }

        @Override
        public long localCacheCapBytes() {
            PoolConfig cfg = config;
            return cfg.mode() == AllocatorMode.TWO_LEVEL ? localCapBytes(cfg) : 0;
        }

        @Override
        public List<StreamCacheMetric> streams() {
            List<StreamCacheMetric> result = new ArrayList<>();
            for (LocalCache cache : caches) {
                if (cache != null) {
                    result.add(new StreamCacheMetric(cache.ordinal, cache.stat(LocalCache.CACHED_BYTES),
                            cache.stat(LocalCache.CACHED_BLOCKS), cache.stat(LocalCache.HITS),
                            cache.stat(LocalCache.MISSES)));
                }
            }
            return result;
        }

        @Override
        public List<FreeOrderMetric> freeBlocks() {
            List<FreeOrderMetric> result = new ArrayList<>();
            for (int k = 0; k <= buddy.topOrder(); k++) {
                result.add(new FreeOrderMetric(k, minBlock << k, buddy.freeBlocks(k)));
            }
            return result;
        }

        /** Free bytes of the global level; under MAPPED growth only the mapped ones (free address space costs nothing). */
        @Override
        public long globalFreeBytes() {
            if (mapping) {
                return freeMappedBytes();
            }
            long total = 0;
            for (int k = 0; k <= buddy.topOrder(); k++) {
                total += (long) buddy.freeBlocks(k) * (minBlock << k);
            }
            return total;
        }

        /**
         * The largest contiguous free range of the global level: adjacent free blocks of the top order
         * in one chunk count as one range (they are never merged into a larger block, yet serve a
         * dedicated-size request of the chunk's space just as well as one block would). Racy copy of
         * the top-order list, no lock taken.
         */
        @Override
        public long largestFreeBlockBytes() {
            int top = buddy.topOrder();
            if (buddy.freeBlocks(top) > 0) {
                long[] keys = buddy.freeKeysUnlocked(top);
                Arrays.sort(keys);
                long step = 1L << top;
                long longest = 0;
                long run = 0;
                for (int i = 0; i < keys.length; i++) {
                    run = i > 0 && Handles.adjacent(keys[i - 1], keys[i], step) ? run + 1 : 1;
                    longest = Math.max(longest, run);
                }
                return Math.max(1, longest) * (minBlock << top);
            }
            for (int k = top; k >= 0; k--) {
                if (buddy.freeBlocks(k) > 0) {
                    return minBlock << k;
                }
            }
            return 0;
        }

        @Override
        public List<SizeClassMetric> smallClasses() {
            return small.metrics(minBlock);
        }

        @Override
        public List<ChunkMetric> chunks() {
            List<ChunkMetric> result = new ArrayList<>();
            for (Chunk chunk : chunks.all()) {
                long live = Math.max(0, Math.min(chunk.units, chunk.liveUnits.get()));
                if (chunk.isAddressSpace()) {                      // what it costs: its mapped units
                    long mappedUnits;
                    synchronized (chunk.mapped) {
                        mappedUnits = chunk.mappedUnits;
                    }
                    result.add(new ChunkMetric(chunk.address, mappedUnits << unitShift,
                            Math.max(0, mappedUnits - live) << unitShift, false));
                    continue;
                }
                result.add(new ChunkMetric(chunk.address, chunk.bytes,
                        chunk.dedicated ? (chunk.idleDedicated ? chunk.bytes : 0) : chunk.bytes - (live << unitShift),
                        chunk.dedicated));
            }
            return result;
        }
    }
}
