package io.gpupool.memory;

import java.time.Duration;

/**
 * A set of runtime changes for {@link DevicePool#tune(PoolTuning)}; a {@code null} component means
 * "leave unchanged". The pool validates the result as a whole through {@link PoolConfig}'s
 * constructor, so a rejected tuning changes nothing.
 */
public record PoolTuning(
        Long localCacheBytesPerStream,
        Integer localCacheCountPerClass,
        Duration localIdleAge,
        Integer coalesceThreshold,
        Long releaseThresholdBytes,
        Duration releaseIdleAge,
        Long growthStepBytes,
        Long maxGrowthStepBytes,
        Long capBytes,
        Double capFraction,
        Double mappedSlack,
        Boolean waitBeyondBudget) {

    /** A tuning that changes nothing; start here and use the {@code with*} methods. */
    public static PoolTuning none() {
        return new PoolTuning(null, null, null, null, null, null, null, null, null, null, null, null);
    }

    public PoolTuning withLocalCacheBytesPerStream(long bytes) {
        return new PoolTuning(bytes, localCacheCountPerClass, localIdleAge, coalesceThreshold, releaseThresholdBytes,
                releaseIdleAge, growthStepBytes, maxGrowthStepBytes, capBytes, capFraction,
                mappedSlack, waitBeyondBudget);
    }

    public PoolTuning withLocalCacheCountPerClass(int count) {
        return new PoolTuning(localCacheBytesPerStream, count, localIdleAge, coalesceThreshold, releaseThresholdBytes,
                releaseIdleAge, growthStepBytes, maxGrowthStepBytes, capBytes, capFraction,
                mappedSlack, waitBeyondBudget);
    }

    public PoolTuning withLocalIdleAge(Duration age) {
        return new PoolTuning(localCacheBytesPerStream, localCacheCountPerClass, age, coalesceThreshold,
                releaseThresholdBytes, releaseIdleAge, growthStepBytes, maxGrowthStepBytes, capBytes, capFraction,
                mappedSlack, waitBeyondBudget);
    }

    public PoolTuning withCoalesceThreshold(int threshold) {
        return new PoolTuning(localCacheBytesPerStream, localCacheCountPerClass, localIdleAge, threshold,
                releaseThresholdBytes, releaseIdleAge, growthStepBytes, maxGrowthStepBytes, capBytes, capFraction,
                mappedSlack, waitBeyondBudget);
    }

    public PoolTuning withReleaseThresholdBytes(long bytes) {
        return new PoolTuning(localCacheBytesPerStream, localCacheCountPerClass, localIdleAge, coalesceThreshold,
                bytes, releaseIdleAge, growthStepBytes, maxGrowthStepBytes, capBytes, capFraction,
                mappedSlack, waitBeyondBudget);
    }

    public PoolTuning withReleaseIdleAge(Duration age) {
        return new PoolTuning(localCacheBytesPerStream, localCacheCountPerClass, localIdleAge, coalesceThreshold,
                releaseThresholdBytes, age, growthStepBytes, maxGrowthStepBytes, capBytes, capFraction,
                mappedSlack, waitBeyondBudget);
    }

    public PoolTuning withGrowthStepBytes(long bytes) {
        return new PoolTuning(localCacheBytesPerStream, localCacheCountPerClass, localIdleAge, coalesceThreshold,
                releaseThresholdBytes, releaseIdleAge, bytes, maxGrowthStepBytes, capBytes, capFraction,
                mappedSlack, waitBeyondBudget);
    }

    public PoolTuning withMaxGrowthStepBytes(long bytes) {
        return new PoolTuning(localCacheBytesPerStream, localCacheCountPerClass, localIdleAge, coalesceThreshold,
                releaseThresholdBytes, releaseIdleAge, growthStepBytes, bytes, capBytes, capFraction,
                mappedSlack, waitBeyondBudget);
    }

    /** Cap in bytes; 0 switches to the fraction. */
    public PoolTuning withCapBytes(long bytes) {
        return new PoolTuning(localCacheBytesPerStream, localCacheCountPerClass, localIdleAge, coalesceThreshold,
                releaseThresholdBytes, releaseIdleAge, growthStepBytes, maxGrowthStepBytes, bytes, capFraction,
                mappedSlack, waitBeyondBudget);
    }

    /** MAPPED growth: free mapped memory kept beyond the allocated high-water mark, as a fraction of it. */
    public PoolTuning withMappedSlack(double slack) {
        return new PoolTuning(localCacheBytesPerStream, localCacheCountPerClass, localIdleAge, coalesceThreshold,
                releaseThresholdBytes, releaseIdleAge, growthStepBytes, maxGrowthStepBytes, capBytes, capFraction,
                slack, waitBeyondBudget);
    }

    /** Cap as a fraction of the source's capacity; also sets capBytes to 0 so the fraction applies. */
    public PoolTuning withCapFraction(double fraction) {
        return new PoolTuning(localCacheBytesPerStream, localCacheCountPerClass, localIdleAge, coalesceThreshold,
                releaseThresholdBytes, releaseIdleAge, growthStepBytes, maxGrowthStepBytes, 0L, fraction,
                mappedSlack, waitBeyondBudget);
    }

    /** MAPPED growth: wait for another stream's freed memory rather than map beyond the budget. */
    public PoolTuning withWaitBeyondBudget(boolean wait) {
        return new PoolTuning(localCacheBytesPerStream, localCacheCountPerClass, localIdleAge, coalesceThreshold,
                releaseThresholdBytes, releaseIdleAge, growthStepBytes, maxGrowthStepBytes, capBytes, capFraction,
                mappedSlack, wait);
    }
}
