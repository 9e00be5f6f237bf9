package io.gpupool.replay;

import io.gpupool.memory.PoolTuning;
import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class ReplayStrategiesTest {

    @Test
    void parsesPoolTuningWithByteSuffixes() {
        PoolTuning tuning = ReplayStrategies.parseTuning("localCacheBytesPerStream=32m, coalesceThreshold=1,"
                + "maxGrowthStepBytes=1g,growthStepBytes=268435456,localCacheCountPerClass=4");
        assertThat(tuning.localCacheBytesPerStream()).isEqualTo(32L << 20);
        assertThat(tuning.coalesceThreshold()).isEqualTo(1);
        assertThat(tuning.maxGrowthStepBytes()).isEqualTo(1L << 30);
        assertThat(tuning.growthStepBytes()).isEqualTo(256L << 20);
        assertThat(tuning.localCacheCountPerClass()).isEqualTo(4);
        assertThat(tuning.capBytes()).isNull();
        assertThat(ReplayStrategies.tuned(tuning)).extracting(TraceReplayer.Strategy::name)
                .containsExactly("two-level*", "global-only*", "best-fit");
    }

    @Test
    void badTuningNamesTheKeyOrValue() {
        assertThatThrownBy(() -> ReplayStrategies.parseTuning("capBytes=1g")).hasMessageContaining("capBytes")
                .hasMessageContaining("known");
        assertThatThrownBy(() -> ReplayStrategies.parseTuning("growthStepBytes=lots"))
                .hasMessageContaining("growthStepBytes").hasMessageContaining("lots");
        assertThatThrownBy(() -> ReplayStrategies.parseTuning("coalesceThreshold")).hasMessageContaining("key=value");
        assertThatThrownBy(() -> ReplayStrategies.byName("worst-fit")).hasMessageContaining("worst-fit")
                .hasMessageContaining("best-fit");
    }
}
