package io.gpupool.memory.pool;

import io.gpupool.memory.AllocationStream;
import io.gpupool.memory.metric.AllocatorMode;
import io.gpupool.memory.ChunkSource;
import io.gpupool.memory.DeviceAllocator;
import io.gpupool.memory.DeviceBlock;
import io.gpupool.memory.GrowthPolicy;
import io.gpupool.memory.OutOfDeviceMemoryException;
import io.gpupool.memory.PoolConfig;
import io.gpupool.memory.PoolTuning;
import io.gpupool.memory.VirtualMemory;
import io.gpupool.memory.metric.PoolMetrics;

import java.util.Objects;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.locks.ReentrantLock;

/**
 * The two-level device memory pool: stream-local caches in front of a global buddy allocator over
 * chunks obtained from a {@link ChunkSource}. This class is the facade; the work is done by
 * package-private parts, each of which explains itself.
 *
 * <pre>
 *   allocate(bytes, stream)
 *     |  bytes &gt; maxBlock ----------------------------&gt; Placement.allocateLarge -&gt; Growth (span or dedicated chunk)
 *     |  class c = GlobalLevel.classIndex(bytes)
 *     v
 *   StreamLevel -&gt; LocalCache[stream.ordinal()]   lock-free for its owner          (exit 1: local hit,
 *                   a class stack, or a run carved from the stream's RunReserve)
 *     v miss
 *   Placement      SmallObjects / BuddyLevel, lock per class / order           (exit 2: global hit)
 *     v nothing free
 *   Growth         ChunkGrowth | MappedGrowth, chosen once; under the grow lock   (exit 3: grown)
 *     v refused
 *   Recovery       staged: flush caches, release slabs, coalesce, return chunks, retry; else fail
 *
 *   free(block)    LocalCache.push (exit 1) | GlobalLevel.returnToGlobal under a fence of the stream
 *                  | DedicatedChunks (a dedicated chunk waits for reuse); a settled block
 *                  (DeviceBlock.releaseSettled: its stream finished with it) needs no fence
 * </pre>
 *
 * <table>
 *   <caption>Parts</caption>
 *   <tr><td>{@link StreamLevel}, {@link LocalCache}, {@link RunReserve}</td><td>the cache table, one stream's
 *       cache, its reserve for runs of varying size</td></tr>
 *   <tr><td>{@link GlobalLevel}, {@link BuddyLevel}, {@link SmallObjects}</td><td>shared structures, frees, fences</td></tr>
 *   <tr><td>{@link Placement}</td><td>which free memory a miss gets</td></tr>
 *   <tr><td>{@link Growth}, {@link ChunkGrowth}, {@link MappedGrowth}</td><td>how the pool obtains memory</td></tr>
 *   <tr><td>{@link DedicatedChunks}</td><td>chunks of their own for the largest requests</td></tr>
 *   <tr><td>{@link Recovery}</td><td>staged recovery, trim, release of empty chunks</td></tr>
 *   <tr><td>{@link Reservation}, {@link PoolStatistics}, {@link PoolMetricsView}</td><td>the cap, counters, metrics</td></tr>
 *   <tr><td>{@link OutstandingBlocks}</td><td>the report of blocks outstanding at close</td></tr>
 * </table>
 *
 * <h2>Concurrency</h2>
 * Local level: an owner word per stream ({@link LocalCache}). Global level: one lock per buddy
 * order and one per small class ({@link BuddyLevel}). Growth, recovery and chunk release are
 * serialised by the grow lock; the source is called under it but outside every order lock. Lock
 * order: grow lock, owner words, order locks ascending / class locks, fence-set monitors (leaves).
 * Nobody holding an owner word takes the grow lock; recovery holds the grow lock and claims owner
 * words to flush the caches.
 *
 * <h2>Housekeeping</h2>
 * Nothing runs in the background: the owner of the pool calls {@link #maintain()} periodically and
 * {@link #trim()} on demand.
 */
public final class DevicePool implements DeviceAllocator {

    private final ChunkSource source;
    private volatile PoolConfig config;
    private final long maxBlock;
    private final CoarseClock clock = new CoarseClock();
    private final ReentrantLock growLock = new ReentrantLock();
    private final Object tuneLock = new Object();
    private final Reservation reservation;
    private final GlobalLevel global;
    private final StreamLevel streams;
    private final PoolStatistics stats;
    private final DedicatedChunks dedicated;
    private final Growth growth;
    private final PoolMetricsView metrics;
    private final Recovery recovery;
    private final Placement placement;
    private final OutstandingBlocks outstanding;
    /** One owner object for all blocks (a method reference per block would allocate). */
    private final DeviceBlock.SettlingOwner owner = this::free;
    private volatile boolean closed;

    /**
     * Creates the pool; with EAGER, HYBRID or ON_DEMAND growth reserves {@code initialBytes} at once
     * (MAPPED: address space).
     *
     * @throws OutOfDeviceMemoryException if the initial reservation is refused
     */
    public DevicePool(ChunkSource source, PoolConfig config) {
        this.source = Objects.requireNonNull(source, "source");
        this.config = Objects.requireNonNull(config, "config");
        this.maxBlock = config.maxBlockBytes();
        long minBlock = config.minBlockBytes();
        int unitShift = Long.numberOfTrailingZeros(minBlock);
        Optional<VirtualMemory> memory = config.growthPolicy() == GrowthPolicy.MAPPED
                ? source.virtualMemory() : Optional.empty();
        if (memory.isPresent() && minBlock % memory.get().granularity() != 0) {
            throw PoolConfig.invalid("minBlockBytes", minBlock, "a multiple of " + source.name()
                    + "'s mapping granularity (" + memory.get().granularity() + " B) with growthPolicy MAPPED");
        }
        // MAPPED falls back to ON_DEMAND on a source that cannot map
        GrowthPolicy policy = memory.isPresent() || config.growthPolicy() != GrowthPolicy.MAPPED
                ? config.growthPolicy() : GrowthPolicy.ON_DEMAND;
        this.reservation = new Reservation(source, this::config);
        this.global = new GlobalLevel(config, memory.isPresent() ? MappedGrowth.largeUnits(unitShift) : 0, reservation);
        // a stream's reserve (RunReserve) is for MAPPED growth, where a run costs only the memory mapped under it;
        // it carves at any unit, so it keeps only runs of small chunks (a large chunk unmaps whole extents only)
        int maxReserveUnits = memory.isPresent() ? MappedGrowth.largeUnits(unitShift) - 1 : 0;
        this.streams = new StreamLevel(global.classBytes(), global.smallCount, maxReserveUnits, global, clock,
                memory.isPresent() ? MappedGrowth.LOCAL_SHARE_FACTOR : ChunkGrowth.localShareFactor(policy), minBlock);
        this.stats = new PoolStatistics(streams);
        this.dedicated = new DedicatedChunks(global, reservation, stats);
        this.growth = memory.isPresent()
                ? new MappedGrowth(memory.get(), global, reservation, stats, streams, dedicated, this::config, growLock)
                : new ChunkGrowth(policy, global, reservation, stats, streams, dedicated, this::config, growLock);
        this.metrics = new PoolMetricsView(streams, global, growth, reservation, stats, this::config);
        this.recovery = new Recovery(streams, global, dedicated, growth, reservation, stats, metrics, this::config, growLock);
        growth.bind(recovery);
        this.placement = new Placement(global, growth, stats);
        this.outstanding = new OutstandingBlocks(config.trackAllocationSites(),
                Set.of(DevicePool.class.getName(), OutstandingBlocks.class.getName()));
        if (config.growthPolicy() != GrowthPolicy.LAZY && config.initialBytes() > 0) {
            growLock.lock();
            try {
                growth.grow(global.roundUp(config.initialBytes()), false);
            } finally {
                growLock.unlock();
            }
        }
    }

    // ------------------------------------------------------------------ allocate, free

    @Override
    public DeviceBlock allocate(long bytes, AllocationStream stream) {
        return allocate(bytes, stream, false);
    }

    /**
     * With local caches (TWO_LEVEL) an arena below the minimum block takes a whole minimum block, a run: a
     * stream then serves arenas of every size from its {@link RunReserve} and its run stacks, where small-object
     * classes would serve only the next arena of the same class and leave a slab behind for every class seen
     * (under MAPPED growth each such slab is mapped, reclaimed and mapped again). It costs at most one minimum
     * block per stream running a small request.
     */
    @Override
    public DeviceBlock allocateArena(long bytes, AllocationStream stream) {
        return allocate(bytes, stream, true);
    }

    /** The bytes an arena of {@code bytes} takes from this pool ({@link #allocateArena}); admissions charge it. */
    public long arenaBlockBytes(long bytes) {
        return bytes > 0 && arenaAsRun(global.classIndex(bytes), config) ? global.classBytes()[global.smallCount]
                : blockBytes(bytes);
    }

    private boolean arenaAsRun(int sizeClass, PoolConfig cfg) {
        return sizeClass < global.smallCount && cfg.mode() == AllocatorMode.TWO_LEVEL;
    }

    private DeviceBlock allocate(long bytes, AllocationStream stream, boolean arena) {
        if (bytes <= 0) {
            throw new IllegalArgumentException("bytes = " + bytes + " is invalid; allowed: a positive size");
        }
        Objects.requireNonNull(stream, "stream");
        if (closed) {
            throw new IllegalStateException("pool on " + source.name() + " is closed");
        }
        if (bytes > maxBlock) {
            return allocateLarge(bytes, stream);
        }
        PoolConfig cfg = config;
        int c = global.classIndex(bytes);
        if (arena && arenaAsRun(c, cfg)) {
            c = global.smallCount;                                 // the one-block run class
        }
        long size = global.classBytes()[c];
        LocalCache cache = cfg.mode() == AllocatorMode.TWO_LEVEL ? streams.cacheFor(stream) : null;
        boolean sampled = cache != null ? cache.latencySampleDue() : PoolStatistics.latencySampleDue();
        long start = 0;
        if (sampled) {
            start = System.nanoTime();
            clock.advance(start);                                  // the idle stamps' clock, from a read made anyway
        }
        long handle = cache != null ? cache.pop(c, size, bytes, cfg) : 0;   // exit 1: local hit, no lock
        if (handle == 0) {
            handle = placement.allocateClass(c, stream, cache, cfg, bytes);   // exit 2 or 3: global level
            size = global.classBytes()[global.classOf(handle)];   // a larger class where the cap left no slab
            long sampleAfter = stats.sampleAfter();
            boolean sampleDue = stats.countAllocation(stream.ordinal(), size, bytes,
                    cache == null ? sampleAfter : GlobalCounters.NO_TRIGGER);
            if (cache != null && c >= global.smallCount) {
                cache.tookRun(handle);
            }
            if (size >= maxBlock >>> 3 || (cache == null ? sampleDue : cache.addUnsampled(size, sampleAfter))) {
                stats.samplePeak();
            }
        }
        DeviceBlock block = new DeviceBlock(owner, global.address(handle), size, bytes, stream, handle, outstanding.site());
        outstanding.added(block);
        if (sampled) {
            stats.latency.record(System.nanoTime() - start);
        }
        return block;
    }

    /** A span or a dedicated chunk for a request above the maximum block. */
    private DeviceBlock allocateLarge(long bytes, AllocationStream stream) {
        boolean sampled = PoolStatistics.latencySampleDue();
        long start = sampled ? System.nanoTime() : 0;
        long handle = placement.allocateLarge(bytes, stream);
        long size = global.largeSize(handle);
        stats.countAllocation(stream.ordinal(), size, bytes, GlobalCounters.NO_TRIGGER);
        stats.samplePeak();
        DeviceBlock block = new DeviceBlock(owner, global.address(handle), size, bytes, stream, handle, outstanding.site());
        outstanding.added(block);
        if (sampled) {
            stats.latency.record(System.nanoTime() - start);
        }
        return block;
    }

    /** @param settled the block's stream finished all work on it ({@link DeviceBlock#releaseSettled}): no fence */
    private void free(DeviceBlock block, boolean settled) {
        outstanding.removed(block);
        if (closed) {
            return;                                                // its chunk already went back at close
        }
        long handle = block.handle();
        AllocationStream stream = block.stream();
        if (Handles.kind(handle) == Handles.KIND_DEDICATED) {
            stats.countFree(stream.ordinal(), block.size(), block.requestedBytes());
            dedicated.put(global.chunks.get(Handles.dedicatedChunkId(handle)), stream, settled);
            return;
        }
        PoolConfig cfg = config;
        boolean span = global.isSpan(handle);
        if (!span && cfg.mode() == AllocatorMode.TWO_LEVEL
                && streams.cacheFor(stream).push(global.classOf(handle), handle, block.size(), block.requestedBytes(), cfg,
                        settled)) {
            return;                                                // exit 1: kept in the stream's cache
        }
        stats.countFree(stream.ordinal(), block.size(), block.requestedBytes());   // exit 2: back to the global level
        global.returnToGlobal(stream, new long[] {handle}, 0, 1, settled);
    }

    /**
     * The bytes a request of {@code bytes} takes from this pool: its small-object class, its run of minimum
     * blocks, or (above the largest block) whole minimum blocks. Planned peaks are charged in these sizes (a
     * request arena in {@link #arenaBlockBytes}).
     */
    public long blockBytes(long bytes) {
        if (bytes <= 0) {
            return 0;
        }
        return bytes > maxBlock ? global.roundUp(bytes) : global.classBytes()[global.classIndex(bytes)];
    }

    /** Moves everything cached for {@code stream} to the global level; call when the stream is destroyed. */
    public void detachStream(AllocationStream stream) {
        streams.detach(stream);
    }

    // ------------------------------------------------------------------ trim, maintain, reserve

    /**
     * Empties every local cache, coalesces the global level and returns every empty chunk to the
     * source (waiting for the streams that last used it).
     *
     * @return bytes returned to the source
     */
    public long trim() {
        growLock.lock();
        try {
            return closed ? 0 : recovery.recoverAll();
        } finally {
            growLock.unlock();
        }
    }

    /**
     * Periodic housekeeping (the server calls it every second or so): flushes local size classes idle
     * beyond {@code localIdleAge}, returns finished dedicated chunks, and returns chunks empty for longer
     * than {@code releaseIdleAge} while reserved bytes stay at or above {@code releaseThresholdBytes};
     * under MAPPED, lowers the mapped budget to the demand once it fell for {@code releaseIdleAge}.
     *
     * @return bytes returned to the source
     */
    public long maintain() {
        if (closed) {
            return 0;
        }
        long now = System.nanoTime();
        clock.set(now);
        PoolConfig cfg = config;
        streams.flushIdle(cfg.localIdleAge().toNanos());
        global.recordIdleLazyFences();                             // after the flush, which may free under one
        long released = dedicated.release(Long.MAX_VALUE, cfg.releaseIdleAge().toNanos(), cfg.releaseThresholdBytes());
        growLock.lock();
        try {
            released += recovery.releaseEmptyChunks(false);
            return released + growth.maintain(now, cfg);
        } finally {
            growLock.unlock();
        }
    }

    /**
     * Makes sure at least {@code bytes} are reserved (warm-up sizing, e.g. 1.5 x the largest tensor),
     * growing by one chunk if needed and within the cap (MAPPED: address space).
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
            long missing = bytes - growth.sizedBytes();
            if (missing <= 0) {
                return 0;
            }
            long size = global.roundUp(missing);
            growth.grow(size, false);
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
            global.buddy.setThreshold(next.coalesceThreshold());
            if (tuning.growthStepBytes() != null) {
                growLock.lock();
                try {
                    growth.restartSteps(next.growthStepBytes());
                    config = next;
                } finally {
                    growLock.unlock();
                }
            } else {
                config = next;
            }
            if (tuning.capBytes() != null || tuning.capFraction() != null) {
                growth.afterCapChange();                           // kept physical memory above a lower cap goes
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
            recovery.flushAndCoalesce();
            leaks = outstanding.describe(source.name(), metrics, global);
            closed = true;
            dedicated.clear();                                     // released with every chunk below
            for (Chunk chunk : global.chunks.all()) {
                growth.releaseChunk(chunk);
            }
            growth.afterClose();
        } finally {
            growLock.unlock();
        }
        if (leaks != null) {
            throw new IllegalStateException(leaks);
        }
    }

    // ------------------------------------------------------------------ for tests of this package

    /** Flushes every local cache, releases empty slabs and coalesces, returning nothing to the source. */
    void flushAndCoalesce() {
        growLock.lock();
        try {
            recovery.flushAndCoalesce();
        } finally {
            growLock.unlock();
        }
    }

    /** Free blocks per order as keys {@code (chunkId << 24) | offset}. */
    long[][] freeListSnapshot() {
        return global.buddy.snapshotFree();
    }

    long minBlockBytes() {
        return global.minBlock;
    }
}
