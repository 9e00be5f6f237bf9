package io.gpupool.config;

import io.gpupool.memory.AllocatorMode;
import io.gpupool.memory.PoolConfig;

import java.util.Map;
import java.util.Objects;

/**
 * Validated {@code gpupool.memory.*}: the allocator mode and the pool configuration. The pool's own
 * record validates the sizes; its messages are rewritten to name our property (e.g.
 * {@code gpupool.memory.cap} instead of the record field {@code capBytes}).
 *
 * @param mode the allocator of each device's activations
 * @param pool the configuration of {@code DevicePool} (its mode is TWO_LEVEL for the non-pool modes,
 *             which only read the sizes that apply to them)
 * @param faultProbability share of chunk requests made to fail ({@code gpupool.memory.fault-injection.probability},
 *             testing only), 0 = off
 * @param faultSeed seed of those draws
 * @param expandableSegments whether CUDA devices grow the pool in one reserved virtual range
 *             ({@code gpupool.memory.expandable-segments}; the host backend ignores it)
 */
public record MemorySettings(AllocatorMode mode, PoolConfig pool, double faultProbability, long faultSeed,
                             boolean expandableSegments) {

    private static final Map<String, String> PROPERTY_OF_FIELD = Map.ofEntries(
            Map.entry("minBlockBytes", "min-block-size"), Map.entry("maxBlockBytes", "max-block-size"),
            Map.entry("growthPolicy", "growth-policy"), Map.entry("initialBytes", "initial-size"),
            Map.entry("growthStepBytes", "growth-step"), Map.entry("maxGrowthStepBytes", "max-growth-step"),
            Map.entry("capBytes", "cap"), Map.entry("capFraction", "cap-fraction"),
            Map.entry("localCacheBytesPerStream", "local-cache-size"),
            Map.entry("localCacheCountPerClass", "local-cache-count-per-class"),
            Map.entry("localIdleAge", "local-idle-age"), Map.entry("coalesceThreshold", "coalesce-threshold"),
            Map.entry("releaseThresholdBytes", "release-threshold"), Map.entry("releaseIdleAge", "release-idle-age"),
            Map.entry("mappedSlack", "mapped-slack"));

    public MemorySettings {
        Objects.requireNonNull(mode, "gpupool.memory.mode must be one of TWO_LEVEL, GLOBAL_ONLY, BEST_FIT, DIRECT, CUDA_ASYNC");
        Objects.requireNonNull(pool, "pool");
        if (!(faultProbability >= 0.0 && faultProbability <= 1.0)) {
            throw new IllegalArgumentException("gpupool.memory.fault-injection.probability = " + faultProbability
                    + " is invalid; allowed: [0, 1] (0 = off)");
        }
    }

    static MemorySettings of(GpuPoolProperties.Memory memory) {
        AllocatorMode poolMode = memory.getMode() == AllocatorMode.GLOBAL_ONLY ? AllocatorMode.GLOBAL_ONLY
                : AllocatorMode.TWO_LEVEL;
        try {
            PoolConfig pool = new PoolConfig(poolMode, bytes(memory.getMinBlockSize()),
                    bytes(memory.getMaxBlockSize()), memory.getGrowthPolicy(), bytes(memory.getInitialSize()),
                    bytes(memory.getGrowthStep()), bytes(memory.getMaxGrowthStep()), bytes(memory.getCap()),
                    memory.getCapFraction(), bytes(memory.getLocalCacheSize()), memory.getLocalCacheCountPerClass(),
                    memory.getLocalIdleAge(), memory.getCoalesceThreshold(), bytes(memory.getReleaseThreshold()),
                    memory.getReleaseIdleAge(), memory.getMappedSlack(), memory.isWaitBeyondBudget(),
                    memory.isTrackAllocationSites());
            return new MemorySettings(memory.getMode(), pool, memory.getFaultInjection().getProbability(),
                    memory.getFaultInjection().getSeed(), memory.isExpandableSegments());
        } catch (IllegalArgumentException | NullPointerException e) {
            throw new IllegalArgumentException(withPropertyNames(String.valueOf(e.getMessage())));
        }
    }

    private static long bytes(org.springframework.util.unit.DataSize size) {
        return size == null ? 0 : size.toBytes();
    }

    /** "gpupool.memory.capBytes = 5 is invalid" becomes "gpupool.memory.cap = 5 bytes is invalid". */
    static String withPropertyNames(String message) {
        String result = message;
        for (Map.Entry<String, String> entry : PROPERTY_OF_FIELD.entrySet()) {
            result = result.replace("gpupool.memory." + entry.getKey() + " ", "gpupool.memory." + entry.getValue() + " ");
        }
        return result;
    }
}
