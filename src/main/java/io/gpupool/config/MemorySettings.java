package io.gpupool.config;

import io.gpupool.memory.metric.AllocatorMode;
import io.gpupool.memory.PoolConfig;

import java.util.Locale;
import java.util.regex.Pattern;
import java.util.Objects;

/**
 * Validated {@code gpupool.memory.*}: the allocator mode and the pool configuration. Each pool property
 * is named after the {@link PoolConfig} component it sets ({@code capBytes} is {@code cap-bytes}), so the
 * pool's own validation message only needs the component's name written as a property.
 *
 * @param mode the allocator of each device's activations
 * @param pool the configuration of {@code DevicePool} (its mode is TWO_LEVEL for the non-pool modes,
 *             which only read the sizes that apply to them)
 * @param faultProbability share of chunk requests made to fail ({@code gpupool.memory.fault-injection.probability},
 *             testing only), 0 = off
 * @param faultSeed seed of those draws
 * @param expandableSegments whether CUDA devices grow the pool in one reserved virtual range
 *             ({@code gpupool.memory.expandable-segments}; the host backend ignores it)
 * @param admission whether requests reserve their planned peak under the pool's cap before they run
 *             ({@code gpupool.memory.admission.enabled}; pool modes only)
 */
public record MemorySettings(AllocatorMode mode, PoolConfig pool, double faultProbability, long faultSeed,
                             boolean expandableSegments, boolean admission) {

    /** The pool's way of naming a field in its messages: {@code gpupool.memory.capBytes = ...}. */
    private static final Pattern FIELD_IN_MESSAGE = Pattern.compile("gpupool\\.memory\\.([a-z][A-Za-z0-9]*)\\b");

    public MemorySettings {
        Objects.requireNonNull(mode, "gpupool.memory.mode must be one of TWO_LEVEL, GLOBAL_ONLY, BEST_FIT, DIRECT, CUDA_ASYNC");
        Objects.requireNonNull(pool, "pool");
        if (!(faultProbability >= 0.0 && faultProbability <= 1.0)) {
            throw new IllegalArgumentException("gpupool.memory.fault-injection.probability = " + faultProbability
                    + " is invalid; allowed: [0, 1] (0 = off)");
        }
    }

    /**
     * The configured extent, or the default brought into the block range (at least the minimum block, which is
     * the smallest thing that maps; at most the largest block and 16 MiB), so that a block range of its own
     * needs no extent of its own.
     */
    private static long mappedExtentBytes(GpuPoolProperties.Memory memory) {
        if (memory.getMappedExtentBytes() != null) {
            return bytes(memory.getMappedExtentBytes());
        }
        return PoolConfig.mappedExtentWithin(PoolConfig.DEFAULT_MAPPED_EXTENT_BYTES, bytes(memory.getMinBlockBytes()),
                bytes(memory.getMaxBlockBytes()));
    }

    static MemorySettings of(GpuPoolProperties.Memory memory) {
        AllocatorMode poolMode = memory.getMode() == AllocatorMode.GLOBAL_ONLY ? AllocatorMode.GLOBAL_ONLY
                : AllocatorMode.TWO_LEVEL;
        try {
            PoolConfig pool = new PoolConfig(poolMode, bytes(memory.getMinBlockBytes()),
                    bytes(memory.getMaxBlockBytes()), memory.getGrowthPolicy(), bytes(memory.getInitialBytes()),
                    bytes(memory.getGrowthStepBytes()), bytes(memory.getMaxGrowthStepBytes()), bytes(memory.getCapBytes()),
                    memory.getCapFraction(), bytes(memory.getLocalCacheBytesPerStream()), memory.getLocalCacheCountPerClass(),
                    memory.getLocalIdleAge(), memory.getCoalesceThreshold(), bytes(memory.getReleaseThresholdBytes()),
                    memory.getReleaseIdleAge(), memory.getMappedSlack(), bytes(memory.getRetainedHandleBytes()),
                    mappedExtentBytes(memory),
                    memory.isWaitBeyondBudget(), memory.getBudgetReclaim(), memory.getReclaimOrder(), memory.getReclaimHysteresis(),
                    memory.isTrackAllocationSites(), memory.isLazyFences());
            return new MemorySettings(memory.getMode(), pool, memory.getFaultInjection().getProbability(),
                    memory.getFaultInjection().getSeed(), memory.isExpandableSegments(),
                    memory.getAdmission().isEnabled());
        }
        catch (IllegalArgumentException | NullPointerException e) {
            throw new IllegalArgumentException(withPropertyNames(String.valueOf(e.getMessage())));
        }
    }

    private static long bytes(org.springframework.util.unit.DataSize size) {
        return size == null ? 0 : size.toBytes();
    }

    /** "gpupool.memory.capBytes = 5 is invalid" becomes "gpupool.memory.cap-bytes = 5 is invalid". */
    static String withPropertyNames(String message) {
        return FIELD_IN_MESSAGE.matcher(message).replaceAll(m -> "gpupool.memory." + kebab(m.group(1)));
    }

    /** {@code localCacheBytesPerStream} as Boot binds it: {@code local-cache-bytes-per-stream}. */
    static String kebab(String camel) {
        return camel.replaceAll("([a-z0-9])([A-Z])", "$1-$2").toLowerCase(Locale.ROOT);
    }
}
