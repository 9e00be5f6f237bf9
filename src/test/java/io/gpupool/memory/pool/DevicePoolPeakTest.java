package io.gpupool.memory.pool;

import io.gpupool.memory.DeviceBlock;
import io.gpupool.memory.PoolConfig;

import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;

import static io.gpupool.memory.PoolConfig.GIB;
import static io.gpupool.memory.PoolConfig.MIB;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * The allocated peak is not sampled on every local miss (that read a line of every stream's cache);
 * it must still catch a burst that is gone before anyone reads the metrics, within the documented
 * lag of peak / 2^{@link PoolStatistics#PEAK_LAG_SHIFT} per stream.
 */
class DevicePoolPeakTest {

    private final FakeChunkSource source = new FakeChunkSource(8 * GIB);

    @Test
    void aBurstOfSmallGlobalAllocationsShowsInThePeakAfterItWasFreed() {
        try (DevicePool pool = new DevicePool(source, PoolConfig.defaults())) {
            TestStream stream = new TestStream(0);
            List<DeviceBlock> burst = new ArrayList<>();
            for (int i = 0; i < 100; i++) {
                burst.add(pool.allocate(2 * MIB, stream));         // every one a local miss: the global level
            }
            burst.forEach(DeviceBlock::release);

            long truePeak = 200 * MIB;
            assertThat(pool.metrics().allocatedBytes()).isZero();
            assertThat(pool.metrics().peakAllocatedBytes())
                    .isLessThanOrEqualTo(truePeak)
                    .isGreaterThanOrEqualTo(truePeak - (truePeak >>> PoolStatistics.PEAK_LAG_SHIFT));
        }
    }

    /** Operators compare the two peaks: their ratio is the pool's rounding (a 5 MB tensor in 2 MiB units holds 6 MiB). */
    @Test
    void thePeakOfRequestedBytesStandsBesideThePeakOfAllocatedBytes() {
        try (DevicePool pool = new DevicePool(source, PoolConfig.defaults())) {
            TestStream stream = new TestStream(0);
            List<DeviceBlock> tensors = new ArrayList<>();
            for (int i = 0; i < 3; i++) {
                tensors.add(pool.allocate(5_000_000, stream));
            }
            tensors.forEach(DeviceBlock::release);

            assertThat(pool.metrics().requestedBytes()).isZero();
            assertThat(pool.metrics().peakRequestedBytes()).isEqualTo(15_000_000);
            assertThat(pool.metrics().peakAllocatedBytes()).isEqualTo(18 * MIB);

            pool.metrics().resetPeaks();
            assertThat(pool.metrics().peakRequestedBytes()).isZero();
            DeviceBlock one = pool.allocate(5_000_000, stream);    // a local hit now: sampled on the read
            assertThat(pool.metrics().peakRequestedBytes()).isEqualTo(5_000_000);
            one.release();
        }
    }

    @Test
    void interleavedBurstsOfSeveralStreamsLagByAtMostTheirShares() {
        int streams = 4;
        try (DevicePool pool = new DevicePool(source, PoolConfig.defaults())) {
            List<TestStream> lanes = new ArrayList<>();
            for (int s = 0; s < streams; s++) {
                lanes.add(new TestStream(s));
            }
            List<DeviceBlock> burst = new ArrayList<>();
            for (int i = 0; i < 40; i++) {
                for (TestStream lane : lanes) {
                    burst.add(pool.allocate(i % 2 == 0 ? 2 * MIB : 256 * 1024, lane));
                }
            }
            long truePeak = 0;
            for (DeviceBlock block : burst) {
                truePeak += block.size();
            }
            burst.forEach(DeviceBlock::release);

            assertThat(pool.metrics().peakAllocatedBytes())
                    .isLessThanOrEqualTo(truePeak)
                    .isGreaterThanOrEqualTo(truePeak - streams * (truePeak >>> PoolStatistics.PEAK_LAG_SHIFT));
        }
    }
}
