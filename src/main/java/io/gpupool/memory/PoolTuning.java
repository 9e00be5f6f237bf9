package io.gpupool.memory;

import java.time.Duration;

/**
 * A set of runtime changes for {@link DevicePool#tune(PoolTuning)}; a {@code null} component means
 * "leave unchanged". The pool validates the result as a whole through {@link PoolConfig}'s
 * constructor, so a rejected tuning changes nothing.
 *
 * <p>Each component bears the name of the {@link PoolConfig} component it changes; the actuator's
 * request fields and the {@code gpupool.memory.*} properties derive from these names, so a knob has
 * one name everywhere. Build one with {@link #builder()}.
 *
 * <p>A fraction cap given without a byte cap also sets {@code capBytes} to 0, because a byte cap in
 * force would hide the fraction.
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
        Boolean waitBeyondBudget,
        BudgetReclaim budgetReclaim,
        ReclaimOrder reclaimOrder,
        Double reclaimHysteresis) {

    public PoolTuning {
        if (capFraction != null && capBytes == null) {
            capBytes = 0L;
        }
    }

    /** A tuning that changes nothing. */
    public static PoolTuning none() {
        return builder().build();
    }

    public static Builder builder() {
        return new Builder();
    }

    /** Collects the components to change; every method names the component it sets. */
    public static final class Builder {

        private Long localCacheBytesPerStream;
        private Integer localCacheCountPerClass;
        private Duration localIdleAge;
        private Integer coalesceThreshold;
        private Long releaseThresholdBytes;
        private Duration releaseIdleAge;
        private Long growthStepBytes;
        private Long maxGrowthStepBytes;
        private Long capBytes;
        private Double capFraction;
        private Double mappedSlack;
        private Boolean waitBeyondBudget;
        private BudgetReclaim budgetReclaim;
        private ReclaimOrder reclaimOrder;
        private Double reclaimHysteresis;

        private Builder() {
        }

        public Builder localCacheBytesPerStream(long bytes) {
            this.localCacheBytesPerStream = bytes;
            return this;
        }

        public Builder localCacheCountPerClass(int count) {
            this.localCacheCountPerClass = count;
            return this;
        }

        public Builder localIdleAge(Duration age) {
            this.localIdleAge = age;
            return this;
        }

        public Builder coalesceThreshold(int threshold) {
            this.coalesceThreshold = threshold;
            return this;
        }

        public Builder releaseThresholdBytes(long bytes) {
            this.releaseThresholdBytes = bytes;
            return this;
        }

        public Builder releaseIdleAge(Duration age) {
            this.releaseIdleAge = age;
            return this;
        }

        public Builder growthStepBytes(long bytes) {
            this.growthStepBytes = bytes;
            return this;
        }

        public Builder maxGrowthStepBytes(long bytes) {
            this.maxGrowthStepBytes = bytes;
            return this;
        }

        /** Cap in bytes; 0 lets {@code capFraction} apply. */
        public Builder capBytes(long bytes) {
            this.capBytes = bytes;
            return this;
        }

        /** Cap as a fraction of the source's capacity; without {@link #capBytes} it also sets that to 0. */
        public Builder capFraction(double fraction) {
            this.capFraction = fraction;
            return this;
        }

        /** MAPPED growth: free mapped memory kept beyond the allocated high-water mark, as a fraction of it. */
        public Builder mappedSlack(double slack) {
            this.mappedSlack = slack;
            return this;
        }

        /** MAPPED growth: wait for another stream's freed memory rather than map beyond the budget. */
        public Builder waitBeyondBudget(boolean wait) {
            this.waitBeyondBudget = wait;
            return this;
        }

        /** MAPPED growth: which free blocks of one size a reclaim for the budget unmaps first. */
        /** MAPPED growth: where free mapped memory above the budget goes back. */
        public Builder budgetReclaim(BudgetReclaim reclaim) {
            this.budgetReclaim = reclaim;
            return this;
        }

        public Builder reclaimOrder(ReclaimOrder order) {
            this.reclaimOrder = order;
            return this;
        }

        /** MAPPED growth: how far below the budget a reclaim unmaps, as a fraction of the slack. */
        public Builder reclaimHysteresis(double hysteresis) {
            this.reclaimHysteresis = hysteresis;
            return this;
        }

        public PoolTuning build() {
            return new PoolTuning(localCacheBytesPerStream, localCacheCountPerClass, localIdleAge, coalesceThreshold,
                    releaseThresholdBytes, releaseIdleAge, growthStepBytes, maxGrowthStepBytes, capBytes, capFraction,
                    mappedSlack, waitBeyondBudget, budgetReclaim, reclaimOrder, reclaimHysteresis);
        }
    }
}
