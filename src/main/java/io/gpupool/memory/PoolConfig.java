package io.gpupool.memory;

import io.gpupool.memory.metric.AllocatorMode;
import java.time.Duration;
import java.util.Objects;
import java.util.function.Consumer;

/**
 * The validated, immutable configuration of a {@link io.gpupool.memory.pool.DevicePool}.
 *
 * <p>Every constructor call checks all fields and rejects a bad value with a message naming the
 * field, the value and the allowed range, so a running pool never sees an inconsistent
 * configuration. {@link #defaults()} gives the documented defaults; the {@code with*} methods
 * and {@link #apply(PoolTuning)} derive validated copies.
 *
 * @param mode                     {@link AllocatorMode#TWO_LEVEL} (stream-local caches in front of the
 *                                 global pool) or {@link AllocatorMode#GLOBAL_ONLY}
 * @param minBlockBytes            smallest buddy block; a power of two in [2 MiB, 64 MiB]; default 2 MiB.
 *                                 Requests below it are served by the small-object cache
 * @param maxBlockBytes            largest buddy block; a power of two in [minBlockBytes, 4 GiB] and at most
 *                                 2^15 minimum blocks; default 256 MiB. Without mapping (ON_DEMAND) smaller
 *                                 blocks reserve less at the price of more device allocations per request
 *                                 (docs/benchmarks.md, "Fragmentation").
 *                                 Larger requests get a dedicated chunk of their own size
 * @param growthPolicy             MAPPED, ON_DEMAND, EAGER, LAZY or HYBRID; default MAPPED, which acts as ON_DEMAND
 *                                 on a source that cannot map (see {@link GrowthPolicy})
 * @param initialBytes             bytes reserved at construction for EAGER / HYBRID / ON_DEMAND (0 for LAZY); at most
 *                                 the cap; rounded up to a multiple of minBlockBytes. The server passes
 *                                 e.g. 1.5 x the largest tensor seen in warm-up
 * @param growthStepBytes          LAZY / HYBRID: size of the first lazily grown chunk (ON_DEMAND ignores it
 *                                 and maxGrowthStepBytes); a multiple of minBlockBytes in
 *                                 [maxBlockBytes, maxGrowthStepBytes]; default 256 MiB
 * @param maxGrowthStepBytes       lazy chunk sizes double from growthStepBytes up to this; default 1 GiB
 * @param capBytes                 most bytes the pool reserves from its source, or 0 to use capFraction
 * @param capFraction              cap as a fraction of {@link ChunkSource#capacityBytes()} when capBytes is 0;
 *                                 in (0, 1]; default 0.9
 * @param localCacheBytesPerStream most bytes one stream's local cache holds; [0, 1 TiB]; 0 disables the
 *                                 local level in effect; blocks above a quarter of it are not cached
 *                                 locally; default 256 MiB. Under ON_DEMAND a stream's cap is further lowered
 *                                 to its share of 1/8 of the pool's allocated bytes, under MAPPED to its share
 *                                 of 1/2 of them (at least 4 minimum blocks either way)
 * @param localCacheCountPerClass  most free blocks one stream caches per size class; [0, 64]; default 16
 * @param localIdleAge             a local size class unused for longer is flushed to the global level; [0, 1 h];
 *                                 default 10 s
 * @param coalesceThreshold        free blocks of one order merge with their buddies once that order holds
 *                                 more than this many; [1, 1 000 000]; default 10
 * @param releaseThresholdBytes    reserved bytes the pool keeps even when idle; empty chunks above this are
 *                                 returned to the source once idle for releaseIdleAge; >= 0; default 0
 * @param releaseIdleAge           how long a chunk must stay empty before it is returned; [0, 1 day];
 *                                 default 30 s
 * @param mappedSlack              MAPPED growth: free mapped memory the global level keeps beyond the high-water
 *                                 mark of allocated bytes, as a fraction of that mark (at least 8 minimum
 *                                 blocks); more is unmapped. [0, 1]; default 0.0625 (1/16). More slack holds
 *                                 more memory and maps less (docs/benchmarks.md, "MAPPED")
 * @param retainedHandleBytes      MAPPED growth: physical memory the pool unmaps but keeps to map again elsewhere,
 *                                 so that shrinking and growing again make no driver create and release; kept
 *                                 memory counts as reserved and obeys the cap, and goes on trim, recovery, a
 *                                 lower cap, close, and after releaseIdleAge unused. >= 0; default 0 (nothing
 *                                 kept: plain map and unmap calls). Not tunable at runtime
 * @param mappedExtentBytes        MAPPED growth: the size of each physical allocation under runs below the large-run
 *                                 size (64 MiB; larger runs map 16 MiB extents). The driver charges a map and an
 *                                 unmap per physical allocation, whatever its size, so larger extents make fewer
 *                                 driver calls; a run smaller than an extent shares it with its neighbours, and
 *                                 free memory unmaps in whole extents only. A power of two in [minBlockBytes,
 *                                 min(maxBlockBytes, 16 MiB)]; default {@value #DEFAULT_MAPPED_EXTENT_BYTES} B
 *                                 (docs/benchmarks.md, "Mapped extents"). Not tunable at runtime
 * @param waitBeyondBudget         MAPPED growth: when no free block the stream can take without waiting is
 *                                 mapped and mapping one would pass the mapped budget (the high-water mark +
 *                                 mappedSlack), take a mapped block another stream freed and make the stream
 *                                 wait for that stream's work (what cudaMallocAsync does) rather than map more.
 *                                 Default false (map before wait). Holds less and maps less when the device
 *                                 runs behind the host, at more cross-stream waits (docs/benchmarks.md).
 *                                 Tunable at runtime
 * @param budgetReclaim            MAPPED growth: where free mapped memory above the budget goes back ({@link BudgetReclaim}):
 *                                 ON_MAP (the allocation that would pass the budget unmaps first) or PERIODIC
 *                                 (the pool's maintenance unmaps; allocations map beyond the budget within the
 *                                 cap). Default ON_MAP, here and in the server (which adds waitBeyondBudget in
 *                                 its application.yml). Tunable at runtime
 * @param reclaimOrder             MAPPED growth: which free blocks a reclaim for the budget unmaps first within one
 *                                 block size ({@link ReclaimOrder}); default HIGHEST_ADDRESS. Tunable at runtime
 * @param reclaimHysteresis        MAPPED growth: a reclaim for the budget unmaps down to this fraction of the slack
 *                                 (budget minus high-water mark) below the budget, so the next maps do not each start
 *                                 a reclaim; [0, 1]; default 0.25; 0 stops at the budget. Tunable at runtime
 * @param trackAllocationSites     remember a stack trace per block to report leaks at close; default false
 * @param lazyFences               a free into the global level records no fence; one is recorded on the freeing
 *                                 stream only when another stream takes the memory before the freeing stream
 *                                 was host-synchronised (then later than needed, never too early). Default
 *                                 true (docs/benchmarks.md, "Lazy fences"). Not tunable at runtime
 */
public record PoolConfig(
        AllocatorMode mode,
        long minBlockBytes,
        long maxBlockBytes,
        GrowthPolicy growthPolicy,
        long initialBytes,
        long growthStepBytes,
        long maxGrowthStepBytes,
        long capBytes,
        double capFraction,
        long localCacheBytesPerStream,
        int localCacheCountPerClass,
        Duration localIdleAge,
        int coalesceThreshold,
        long releaseThresholdBytes,
        Duration releaseIdleAge,
        double mappedSlack,
        long retainedHandleBytes,
        long mappedExtentBytes,
        boolean waitBeyondBudget,
        BudgetReclaim budgetReclaim,
        ReclaimOrder reclaimOrder,
        double reclaimHysteresis,
        boolean trackAllocationSites,
        boolean lazyFences) {

    public static final long KIB = 1024L;
    public static final long MIB = 1024L * KIB;
    public static final long GIB = 1024L * MIB;
    /** Every address and size handed out is a multiple of this. */
    public static final int ALIGNMENT = 256;
    /** Upper bound of {@link #localCacheCountPerClass()}; local class arrays are sized once with it. */
    public static final int MAX_LOCAL_COUNT_PER_CLASS = 64;
    /** Default of {@link #mappedSlack()}: 1/16. */
    public static final double DEFAULT_MAPPED_SLACK = 1.0 / 16;
    /** Default of {@link #mappedExtentBytes()}. */
    public static final long DEFAULT_MAPPED_EXTENT_BYTES = 8 * 1024 * 1024;
    /** Upper bound of {@link #mappedExtentBytes()}: the extent of the large chunks. */
    public static final long MAX_MAPPED_EXTENT_BYTES = 16 * 1024 * 1024;
    /** Default of {@link #reclaimHysteresis()}: a quarter of the slack. */
    public static final double DEFAULT_RECLAIM_HYSTERESIS = 0.25;
    /** Upper bound of maxBlockBytes / minBlockBytes (the packed handle keeps run lengths in 16 bits). */
    public static final long MAX_BLOCK_RATIO = 1L << 15;

    public PoolConfig {
        Objects.requireNonNull(mode, "mode must not be null (allowed: TWO_LEVEL, GLOBAL_ONLY)");
        Objects.requireNonNull(growthPolicy, "growthPolicy must not be null (allowed: MAPPED, ON_DEMAND, EAGER, LAZY, HYBRID)");
        Objects.requireNonNull(localIdleAge, "localIdleAge must not be null");
        Objects.requireNonNull(releaseIdleAge, "releaseIdleAge must not be null");
        Objects.requireNonNull(budgetReclaim, "budgetReclaim must not be null (allowed: ON_MAP, PERIODIC)");
        Objects.requireNonNull(reclaimOrder, "reclaimOrder must not be null (allowed: HIGHEST_ADDRESS, COLDEST_IN_ORDER, SMALL_CHUNKS_FIRST)");
        if (mode != AllocatorMode.TWO_LEVEL && mode != AllocatorMode.GLOBAL_ONLY) {
            throw invalid("mode", mode, "TWO_LEVEL or GLOBAL_ONLY (other modes are separate allocators)");
        }
        requirePowerOfTwo("minBlockBytes", minBlockBytes, 2 * MIB, 64 * MIB);
        requirePowerOfTwo("maxBlockBytes", maxBlockBytes, minBlockBytes, 4 * GIB);
        if (maxBlockBytes / minBlockBytes > MAX_BLOCK_RATIO) {
            throw invalid("maxBlockBytes", maxBlockBytes,
                    "at most " + MAX_BLOCK_RATIO + " x minBlockBytes (" + MAX_BLOCK_RATIO * minBlockBytes + ")");
        }
        if (growthPolicy == GrowthPolicy.LAZY && initialBytes != 0) {
            throw invalid("initialBytes", initialBytes, "0 with growthPolicy LAZY (use HYBRID for an initial size)");
        }
        if (growthPolicy == GrowthPolicy.EAGER && initialBytes <= 0) {
            throw invalid("initialBytes", initialBytes, "> 0 with growthPolicy EAGER (the pool never grows later)");
        }
        requireRange("initialBytes", initialBytes, 0, Long.MAX_VALUE / 2);
        requireMultiple("growthStepBytes", growthStepBytes, minBlockBytes);
        if (growthStepBytes < maxBlockBytes || growthStepBytes > maxGrowthStepBytes) {
            throw invalid("growthStepBytes", growthStepBytes, "[maxBlockBytes (" + maxBlockBytes + "), maxGrowthStepBytes ("
                    + maxGrowthStepBytes + ")]; raise maxGrowthStepBytes with it");
        }
        requireMultiple("maxGrowthStepBytes", maxGrowthStepBytes, minBlockBytes);
        if (maxGrowthStepBytes > 1L << 44) {
            throw invalid("maxGrowthStepBytes", maxGrowthStepBytes, "[growthStepBytes (" + growthStepBytes + "), " + (1L << 44) + "]");
        }
        requireRange("capBytes", capBytes, 0, Long.MAX_VALUE / 2);
        if (capBytes != 0 && capBytes < minBlockBytes) {
            throw invalid("capBytes", capBytes, "0 (use capFraction) or at least minBlockBytes (" + minBlockBytes + ")");
        }
        if (capBytes != 0 && initialBytes > capBytes) {
            throw invalid("initialBytes", initialBytes, "[0, capBytes=" + capBytes + "]");
        }
        if (!(capFraction > 0.0 && capFraction <= 1.0)) {
            throw invalid("capFraction", capFraction, "(0, 1]");
        }
        requireRange("localCacheBytesPerStream", localCacheBytesPerStream, 0, 1L << 40);
        requireRange("localCacheCountPerClass", localCacheCountPerClass, 0, MAX_LOCAL_COUNT_PER_CLASS);
        requireDuration("localIdleAge", localIdleAge, Duration.ofHours(1));
        requireRange("coalesceThreshold", coalesceThreshold, 1, 1_000_000);
        requireRange("releaseThresholdBytes", releaseThresholdBytes, 0, Long.MAX_VALUE / 2);
        requireDuration("releaseIdleAge", releaseIdleAge, Duration.ofDays(1));
        if (!(mappedSlack >= 0.0 && mappedSlack <= 1.0)) {
            throw invalid("mappedSlack", mappedSlack, "[0, 1]");
        }
        requireRange("retainedHandleBytes", retainedHandleBytes, 0, 1L << 44);
        requirePowerOfTwo("mappedExtentBytes", mappedExtentBytes, minBlockBytes, maxMappedExtent(minBlockBytes, maxBlockBytes));
        if (!(reclaimHysteresis >= 0.0 && reclaimHysteresis <= 1.0)) {
            throw invalid("reclaimHysteresis", reclaimHysteresis, "[0, 1]");
        }
    }

    /** The defaults documented on each field. */
    public static PoolConfig defaults() {
        return new PoolConfig(AllocatorMode.TWO_LEVEL, 2 * MIB, 256 * MIB, GrowthPolicy.MAPPED, 0,
                256 * MIB, GIB, 0, 0.9, 256 * MIB, 16, Duration.ofSeconds(10), 10, 0,
                Duration.ofSeconds(30), DEFAULT_MAPPED_SLACK, 0, DEFAULT_MAPPED_EXTENT_BYTES, false, BudgetReclaim.ON_MAP, ReclaimOrder.HIGHEST_ADDRESS,
                DEFAULT_RECLAIM_HYSTERESIS, false, true);
    }

    /**
     * The largest {@link #mappedExtentBytes()} for a block range: the large chunks' extent, at most the largest
     * block, at least the smallest (a minimum block is the smallest unit that maps).
     */
    public static long maxMappedExtent(long minBlockBytes, long maxBlockBytes) {
        return Math.max(minBlockBytes, Math.min(maxBlockBytes, MAX_MAPPED_EXTENT_BYTES));
    }

    /** {@code extentBytes} brought into the range a block range allows: [minBlockBytes, {@link #maxMappedExtent}]. */
    public static long mappedExtentWithin(long extentBytes, long minBlockBytes, long maxBlockBytes) {
        return Math.clamp(extentBytes, minBlockBytes, maxMappedExtent(minBlockBytes, maxBlockBytes));
    }

    /** The cap in bytes for a source of the given capacity, rounded down to a multiple of minBlockBytes. */
    public long effectiveCapBytes(long sourceCapacityBytes) {
        long cap = capBytes != 0 ? capBytes : (long) Math.floor(capFraction * (double) sourceCapacityBytes);
        return cap / minBlockBytes * minBlockBytes;
    }

    /** Returns a validated copy with the tuning's present values replacing ours. */
    public PoolConfig apply(PoolTuning tuning) {
        return copy(c -> {
            if (tuning.growthStepBytes() != null) c.growthStepBytes = tuning.growthStepBytes();
            if (tuning.maxGrowthStepBytes() != null) c.maxGrowthStepBytes = tuning.maxGrowthStepBytes();
            if (tuning.capBytes() != null) c.capBytes = tuning.capBytes();
            if (tuning.capFraction() != null) c.capFraction = tuning.capFraction();
            if (tuning.localCacheBytesPerStream() != null) c.localCacheBytesPerStream = tuning.localCacheBytesPerStream();
            if (tuning.localCacheCountPerClass() != null) c.localCacheCountPerClass = tuning.localCacheCountPerClass();
            if (tuning.localIdleAge() != null) c.localIdleAge = tuning.localIdleAge();
            if (tuning.coalesceThreshold() != null) c.coalesceThreshold = tuning.coalesceThreshold();
            if (tuning.releaseThresholdBytes() != null) c.releaseThresholdBytes = tuning.releaseThresholdBytes();
            if (tuning.releaseIdleAge() != null) c.releaseIdleAge = tuning.releaseIdleAge();
            if (tuning.mappedSlack() != null) c.mappedSlack = tuning.mappedSlack();
            if (tuning.waitBeyondBudget() != null) c.waitBeyondBudget = tuning.waitBeyondBudget();
            if (tuning.budgetReclaim() != null) c.budgetReclaim = tuning.budgetReclaim();
            if (tuning.reclaimOrder() != null) c.reclaimOrder = tuning.reclaimOrder();
            if (tuning.reclaimHysteresis() != null) c.reclaimHysteresis = tuning.reclaimHysteresis();
        });
    }

    public PoolConfig withMode(AllocatorMode newMode) {
        return copy(c -> c.mode = newMode);
    }

    /** Sets the growth policy and its initial size (pass 0 with LAZY). */
    public PoolConfig withGrowth(GrowthPolicy policy, long newInitialBytes) {
        return copy(c -> {
            c.growthPolicy = policy;
            c.initialBytes = newInitialBytes;
        });
    }

    /** Sets the block range; growth steps are raised to at least the new maximum block. */
    public PoolConfig withBlocks(long newMinBlockBytes, long newMaxBlockBytes) {
        return copy(c -> {
            c.minBlockBytes = newMinBlockBytes;
            c.maxBlockBytes = newMaxBlockBytes;
            c.growthStepBytes = Math.max(growthStepBytes, newMaxBlockBytes);
            c.mappedExtentBytes = mappedExtentWithin(mappedExtentBytes, newMinBlockBytes, newMaxBlockBytes);
            c.maxGrowthStepBytes = Math.max(maxGrowthStepBytes, c.growthStepBytes);
        });
    }

    public PoolConfig withTrackAllocationSites(boolean track) {
        return copy(c -> c.trackAllocationSites = track);
    }

    /** Sets {@link #lazyFences()}. */
    public PoolConfig withLazyFences(boolean lazy) {
        return copy(c -> c.lazyFences = lazy);
    }

    /** Sets {@link #waitBeyondBudget()}. */
    public PoolConfig withWaitBeyondBudget(boolean wait) {
        return copy(c -> c.waitBeyondBudget = wait);
    }

    /** Sets {@link #budgetReclaim()}. */
    public PoolConfig withBudgetReclaim(BudgetReclaim reclaim) {
        return copy(c -> c.budgetReclaim = reclaim);
    }

    /** Sets {@link #retainedHandleBytes()}. */
    public PoolConfig withRetainedHandleBytes(long bytes) {
        return copy(c -> c.retainedHandleBytes = bytes);
    }

    /** Sets {@link #mappedExtentBytes()}. */
    public PoolConfig withMappedExtentBytes(long bytes) {
        return copy(c -> c.mappedExtentBytes = bytes);
    }

    /** Sets {@link #reclaimOrder()} and {@link #reclaimHysteresis()}. */
    public PoolConfig withReclaim(ReclaimOrder order, double hysteresis) {
        return copy(c -> {
            c.reclaimOrder = order;
            c.reclaimHysteresis = hysteresis;
        });
    }

    /** This configuration with {@code change} applied to a copy of its values, validated as a new one. */
    private PoolConfig copy(Consumer<Values> change) {
        Values values = new Values(this);
        change.accept(values);
        return values.build();
    }

    /** The components as plain fields, so that each {@code with} method and {@link #apply} name only what they change. */
    private static final class Values {
        AllocatorMode mode;
        long minBlockBytes;
        long maxBlockBytes;
        GrowthPolicy growthPolicy;
        long initialBytes;
        long growthStepBytes;
        long maxGrowthStepBytes;
        long capBytes;
        double capFraction;
        long localCacheBytesPerStream;
        int localCacheCountPerClass;
        Duration localIdleAge;
        int coalesceThreshold;
        long releaseThresholdBytes;
        Duration releaseIdleAge;
        double mappedSlack;
        long retainedHandleBytes;
        long mappedExtentBytes;
        boolean waitBeyondBudget;
        BudgetReclaim budgetReclaim;
        ReclaimOrder reclaimOrder;
        double reclaimHysteresis;
        boolean trackAllocationSites;
        boolean lazyFences;

        Values(PoolConfig c) {
            mode = c.mode;
            minBlockBytes = c.minBlockBytes;
            maxBlockBytes = c.maxBlockBytes;
            growthPolicy = c.growthPolicy;
            initialBytes = c.initialBytes;
            growthStepBytes = c.growthStepBytes;
            maxGrowthStepBytes = c.maxGrowthStepBytes;
            capBytes = c.capBytes;
            capFraction = c.capFraction;
            localCacheBytesPerStream = c.localCacheBytesPerStream;
            localCacheCountPerClass = c.localCacheCountPerClass;
            localIdleAge = c.localIdleAge;
            coalesceThreshold = c.coalesceThreshold;
            releaseThresholdBytes = c.releaseThresholdBytes;
            releaseIdleAge = c.releaseIdleAge;
            mappedSlack = c.mappedSlack;
            retainedHandleBytes = c.retainedHandleBytes;
            mappedExtentBytes = c.mappedExtentBytes;
            waitBeyondBudget = c.waitBeyondBudget;
            budgetReclaim = c.budgetReclaim;
            reclaimOrder = c.reclaimOrder;
            reclaimHysteresis = c.reclaimHysteresis;
            trackAllocationSites = c.trackAllocationSites;
            lazyFences = c.lazyFences;
        }

        PoolConfig build() {
            return new PoolConfig(mode, minBlockBytes, maxBlockBytes, growthPolicy, initialBytes, growthStepBytes,
                    maxGrowthStepBytes, capBytes, capFraction, localCacheBytesPerStream, localCacheCountPerClass,
                    localIdleAge, coalesceThreshold, releaseThresholdBytes, releaseIdleAge, mappedSlack,
                    retainedHandleBytes, mappedExtentBytes, waitBeyondBudget, budgetReclaim, reclaimOrder, reclaimHysteresis,
                    trackAllocationSites, lazyFences);
        }
    }

    /** The rejection every setting uses: names the property, the value given and what is allowed. */
    public static IllegalArgumentException invalid(String field, Object value, String allowed) {
        return new IllegalArgumentException("gpupool.memory." + field + " = " + value + " is invalid; allowed: " + allowed);
    }

    private static void requireRange(String field, long value, long min, long max) {
        if (value < min || value > max) {
            throw invalid(field, value, "[" + min + ", " + max + "]");
        }
    }

    private static void requireMultiple(String field, long value, long unit) {
        if (value <= 0 || value % unit != 0) {
            throw invalid(field, value, "a positive multiple of minBlockBytes (" + unit + ")");
        }
    }

    private static void requirePowerOfTwo(String field, long value, long min, long max) {
        if (value < min || value > max || Long.bitCount(value) != 1) {
            throw invalid(field, value, "a power of two in [" + min + ", " + max + "]");
        }
    }

    private static void requireDuration(String field, Duration value, Duration max) {
        if (value.isNegative() || value.compareTo(max) > 0) {
            throw invalid(field, value, "[PT0S, " + max + "]");
        }
    }
}
