package io.gpupool.actuate;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.concurrent.atomic.AtomicLong;

import io.gpupool.memory.metric.AllocatorMode;
import io.gpupool.memory.PoolTuning;
import io.gpupool.memory.metric.BasicAllocatorMetrics;
import io.gpupool.memory.metric.PoolMetrics;
import org.junit.jupiter.api.Test;

/** {@link AllocatorAdapter}: a mode without a pool as the operations side sees it. */
class AllocatorAdapterTest {

    static final long MIB = 1L << 20;

    private final BasicAllocatorMetrics counts = new BasicAllocatorMetrics("cuda:0 direct", AllocatorMode.DIRECT);
    private final AllocatorAdapter adapter = AllocatorAdapter.of("cuda:0", counts, 8192 * MIB, null);

    @Test
    void theViewFollowsTheAllocatorsTotalsPeaksCountersAndLatency() {
        PoolMetrics view = adapter.metrics();
        counts.onReserve(3 * MIB);
        counts.onAllocate(3 * MIB - 100, 3 * MIB, 1500);
        counts.onReserve(MIB);
        counts.onAllocate(MIB, MIB, 300);
        assertThat(view.reservedBytes()).isEqualTo(4 * MIB);
        assertThat(view.allocatedBytes()).isEqualTo(4 * MIB);
        assertThat(view.requestedBytes()).isEqualTo(4 * MIB - 100);

        counts.onFree(3 * MIB - 100, 3 * MIB);
        counts.onUnreserve(3 * MIB);
        assertThat(view.reservedBytes()).as("read at each call, not copied").isEqualTo(MIB);
        assertThat(view.allocatedBytes()).isEqualTo(MIB);
        assertThat(view.peakReservedBytes()).isEqualTo(4 * MIB);
        assertThat(view.peakAllocatedBytes()).isEqualTo(4 * MIB);
        assertThat(view.peakRequestedBytes()).isEqualTo(4 * MIB - 100);
        assertThat(view.counters().allocations()).isEqualTo(2);
        assertThat(view.counters().frees()).isEqualTo(1);
        assertThat(view.allocationLatency().count()).isEqualTo(2);
        assertThat(view.allocationLatency().percentileNanos(1.0)).isEqualTo(2048);
        assertThat(view.mode()).isEqualTo(AllocatorMode.DIRECT);
        assertThat(view.name()).isEqualTo("cuda:0 direct");

        view.resetPeaks();
        assertThat(counts.peakReservedBytes()).as("a reset through the view resets the allocator").isEqualTo(MIB);
    }

    @Test
    void noLevelsMeansEmptyListsNoFreeMemoryAndNoFragmentation() {
        counts.onReserve(2 * MIB);
        PoolMetrics view = adapter.metrics();
        assertThat(view.cachedBytes()).isZero();
        assertThat(view.streams()).isEmpty();
        assertThat(view.freeBlocks()).isEmpty();
        assertThat(view.smallClasses()).isEmpty();
        assertThat(view.chunks()).isEmpty();
        assertThat(view.globalFreeBytes()).isZero();
        assertThat(view.fragmentation()).isZero();
        assertThat(adapter.layout()).isEmpty();
        assertThat(adapter.trim()).isZero();
        assertThat(adapter.configuration()).isNull();
        assertThat(adapter.capBytes()).as("nothing but the device caps it").isEqualTo(8192 * MIB);
    }

    @Test
    void freeMemoryTheAllocatorKnowsGivesFragmentationAndItsTrimIsUsed() {
        AtomicLong free = new AtomicLong(40 * MIB);
        AtomicLong trimmed = new AtomicLong();
        BasicAllocatorMetrics bestFit = new BasicAllocatorMetrics("host", AllocatorMode.BEST_FIT);
        AllocatorAdapter adapter = new AllocatorAdapter("host:0",
                new AllocatorAdapter.Metrics(bestFit, free::get, () -> 10 * MIB), 1024 * MIB, null,
                () -> trimmed.addAndGet(64 * MIB));
        assertThat(adapter.metrics().globalFreeBytes()).isEqualTo(40 * MIB);
        assertThat(adapter.metrics().largestFreeBlockBytes()).isEqualTo(10 * MIB);
        assertThat(adapter.metrics().fragmentation()).isEqualTo(0.75);
        assertThat(adapter.trim()).isEqualTo(64 * MIB);
        assertThat(trimmed.get()).isEqualTo(64 * MIB);
    }

    @Test
    void tuningIsRefusedNamingTheModeAndTheModesThatCanBeTuned() {
        BasicAllocatorMetrics async = new BasicAllocatorMetrics("cuda:0 cuda-async", AllocatorMode.CUDA_ASYNC);
        AllocatorAdapter adapter = AllocatorAdapter.of("cuda:0", async, 1024 * MIB, null);
        assertThatThrownBy(() -> adapter.tune(PoolTuning.builder().coalesceThreshold(5).build()))
                .isInstanceOf(TuningException.class)
                .hasMessage("mode CUDA_ASYNC has no pool to tune; gpupool.memory.mode=TWO_LEVEL or GLOBAL_ONLY can be tuned");
    }
}
