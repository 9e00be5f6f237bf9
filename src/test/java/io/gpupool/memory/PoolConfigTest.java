package io.gpupool.memory;

import io.gpupool.memory.metric.AllocatorMode;
import org.junit.jupiter.api.Test;

import java.time.Duration;

import static io.gpupool.memory.PoolConfig.GIB;
import static io.gpupool.memory.PoolConfig.MIB;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/** The copies a configuration makes of itself: each changes what it names, and nothing else, and is validated. */
class PoolConfigTest {

    private final PoolConfig defaults = PoolConfig.defaults();

    @Test
    void eachWithChangesOnlyWhatItNames() {
        assertThat(defaults.withMode(AllocatorMode.GLOBAL_ONLY))
                .isEqualTo(sameAsDefaultsBut(AllocatorMode.GLOBAL_ONLY, GrowthPolicy.MAPPED, 0, false, true,
                        BudgetReclaim.ON_MAP, 0, ReclaimOrder.HIGHEST_ADDRESS, PoolConfig.DEFAULT_RECLAIM_HYSTERESIS, false));
        assertThat(defaults.withGrowth(GrowthPolicy.EAGER, 512 * MIB))
                .isEqualTo(sameAsDefaultsBut(AllocatorMode.TWO_LEVEL, GrowthPolicy.EAGER, 512 * MIB, false, true,
                        BudgetReclaim.ON_MAP, 0, ReclaimOrder.HIGHEST_ADDRESS, PoolConfig.DEFAULT_RECLAIM_HYSTERESIS, false));
        assertThat(defaults.withWaitBeyondBudget(true).withBudgetReclaim(BudgetReclaim.PERIODIC)
                .withRetainedHandleBytes(64 * MIB).withReclaim(ReclaimOrder.COLDEST_IN_ORDER, 0.5)
                .withTrackAllocationSites(true).withLazyFences(false))
                .isEqualTo(sameAsDefaultsBut(AllocatorMode.TWO_LEVEL, GrowthPolicy.MAPPED, 0, true, false,
                        BudgetReclaim.PERIODIC, 64 * MIB, ReclaimOrder.COLDEST_IN_ORDER, 0.5, true));
    }

    @Test
    void aLargerMaximumBlockRaisesTheGrowthStepsWithIt() {
        PoolConfig blocks = defaults.withBlocks(4 * MIB, 2 * GIB);
        assertThat(blocks.minBlockBytes()).isEqualTo(4 * MIB);
        assertThat(blocks.maxBlockBytes()).isEqualTo(2 * GIB);
        assertThat(blocks.growthStepBytes()).isEqualTo(2 * GIB);
        assertThat(blocks.maxGrowthStepBytes()).isEqualTo(2 * GIB);
        assertThat(defaults.withBlocks(2 * MIB, 64 * MIB).growthStepBytes()).as("never lowered")
                .isEqualTo(defaults.growthStepBytes());
    }

    @Test
    void aGrowthStepAboveItsMaximumNamesTheSettingThatBoundsIt() {
        assertThatThrownBy(() -> defaults.apply(PoolTuning.builder().growthStepBytes(2 * GIB).build()))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessageStartingWith("gpupool.memory.growthStepBytes = " + 2 * GIB + " is invalid")
                .hasMessageContaining("maxGrowthStepBytes (" + defaults.maxGrowthStepBytes() + ")");
        assertThat(defaults.apply(PoolTuning.builder().growthStepBytes(2 * GIB).maxGrowthStepBytes(4 * GIB).build())
                .growthStepBytes()).as("raised together").isEqualTo(2 * GIB);
    }

    @Test
    void aTuningReplacesOnlyTheValuesItCarries() {
        PoolTuning tuning = PoolTuning.builder().capFraction(0.5).mappedSlack(0.25).localIdleAge(Duration.ofSeconds(3))
                .build();
        PoolConfig tuned = defaults.apply(tuning);
        assertThat(tuned.capFraction()).isEqualTo(0.5);
        assertThat(tuned.mappedSlack()).isEqualTo(0.25);
        assertThat(tuned.localIdleAge()).isEqualTo(Duration.ofSeconds(3));
        assertThat(tuned.withBlocks(defaults.minBlockBytes(), defaults.maxBlockBytes()).apply(
                PoolTuning.builder().capFraction(defaults.capFraction()).mappedSlack(defaults.mappedSlack())
                        .localIdleAge(defaults.localIdleAge()).build())).as("and back").isEqualTo(defaults);
        assertThat(defaults.apply(PoolTuning.builder().build())).isEqualTo(defaults);
    }

    @Test
    void aTuningOfEveryValueReachesEveryComponentItNames() {
        PoolTuning every = new PoolTuning(64 * MIB, 8, Duration.ofSeconds(4), 20, 32 * MIB, Duration.ofSeconds(50),
                512 * MIB, 2 * GIB, 4 * GIB, 0.5, 0.2, true, BudgetReclaim.PERIODIC, ReclaimOrder.COLDEST_IN_ORDER, 0.75);
        PoolConfig tuned = defaults.apply(every);
        assertThat(tuned).isEqualTo(new PoolConfig(defaults.mode(), defaults.minBlockBytes(), defaults.maxBlockBytes(),
                defaults.growthPolicy(), defaults.initialBytes(), 512 * MIB, 2 * GIB, 4 * GIB, 0.5, 64 * MIB, 8,
                Duration.ofSeconds(4), 20, 32 * MIB, Duration.ofSeconds(50), 0.2, defaults.retainedHandleBytes(),
                defaults.mappedExtentBytes(), true,
                BudgetReclaim.PERIODIC, ReclaimOrder.COLDEST_IN_ORDER, 0.75, defaults.trackAllocationSites(),
                defaults.lazyFences()));
    }

    @Test
    void aCopyIsValidatedLikeANewConfiguration() {
        assertThatThrownBy(() -> defaults.withReclaim(ReclaimOrder.HIGHEST_ADDRESS, 1.5))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessage("gpupool.memory.reclaimHysteresis = 1.5 is invalid; allowed: [0, 1]");
        assertThatThrownBy(() -> defaults.withGrowth(GrowthPolicy.LAZY, 64 * MIB))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("initialBytes");
        assertThatThrownBy(() -> defaults.apply(PoolTuning.builder().capBytes(MIB).build()))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("capBytes");
    }

    private PoolConfig sameAsDefaultsBut(AllocatorMode mode, GrowthPolicy growth, long initialBytes, boolean wait,
                                         boolean lazyFences, BudgetReclaim reclaim, long retained, ReclaimOrder order,
                                         double hysteresis, boolean track) {
        PoolConfig d = defaults;
        return new PoolConfig(mode, d.minBlockBytes(), d.maxBlockBytes(), growth, initialBytes, d.growthStepBytes(),
                d.maxGrowthStepBytes(), d.capBytes(), d.capFraction(), d.localCacheBytesPerStream(),
                d.localCacheCountPerClass(), d.localIdleAge(), d.coalesceThreshold(), d.releaseThresholdBytes(),
                d.releaseIdleAge(), d.mappedSlack(), retained, d.mappedExtentBytes(), wait, reclaim, order, hysteresis, track, lazyFences);
    }
}
