package io.gpupool.memory.pool;

import io.gpupool.memory.metric.AllocatorMode;
import io.gpupool.memory.DeviceBlock;
import io.gpupool.memory.GrowthPolicy;
import io.gpupool.memory.PoolConfig;

import io.gpupool.replay.InferenceTraceGenerator;
import io.gpupool.replay.ReplayStrategies;
import io.gpupool.memory.trace.Trace;
import io.gpupool.replay.TraceReplayer;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;

import static io.gpupool.memory.PoolConfig.GIB;
import static io.gpupool.memory.PoolConfig.MIB;
import static org.assertj.core.api.Assertions.assertThat;

/** ON_DEMAND growth (what the default MAPPED falls back to without mapping) and the metrics' contiguous-free measure. */
class OnDemandGrowthTest {

    private final FakeChunkSource source = new FakeChunkSource(8 * GIB);
    private final TestStream s0 = new TestStream(0);
    private final TestStream s1 = new TestStream(1);

    /** ON_DEMAND with 32 MiB maximum blocks (the memory-frugal setting), so that the cases stay small. */
    private static final PoolConfig FRUGAL = PoolConfig.defaults().withGrowth(GrowthPolicy.ON_DEMAND, 0)
            .withBlocks(2 * MIB, 32 * MIB);

    @Test
    void theDefaultsMapWith256MebibyteBlocksAndFallBackToOnDemandWithoutMapping() {
        PoolConfig d = PoolConfig.defaults();
        assertThat(d.growthPolicy()).isEqualTo(GrowthPolicy.MAPPED);
        assertThat(d.maxBlockBytes()).isEqualTo(256 * MIB);
        try (DevicePool pool = new DevicePool(source, d)) {    // this source cannot map
            DeviceBlock block = pool.allocate(10 * MIB, s0);
            assertThat(pool.metrics().addressSpaceBytes()).isZero();
            assertThat(source.requests()).containsExactly(256 * MIB);   // ON_DEMAND: one maximum-block chunk
            block.release();
        }
    }

    @Test
    void growthAddsOneMaximumBlockPerMissInsteadOfDoubling() {
        try (DevicePool pool = new DevicePool(source, FRUGAL)) {
            List<DeviceBlock> live = new ArrayList<>();
            for (int i = 0; i < 5; i++) {
                live.add(pool.allocate(30 * MIB, s0));
            }
            assertThat(source.requests()).containsOnly(32 * MIB).hasSize(5);
            assertThat(pool.metrics().reservedBytes()).isEqualTo(160 * MIB);
            live.forEach(DeviceBlock::release);
        }
    }

    @Test
    void blocksCachedByAnotherStreamAreFlushedAndMergedBeforeThePoolGrows() {
        try (DevicePool pool = new DevicePool(source, FRUGAL)) {
            List<DeviceBlock> blocks = new ArrayList<>();
            for (int i = 0; i < 16; i++) {
                blocks.add(pool.allocate(2 * MIB, s1));             // fills the first 32 MiB chunk
            }
            blocks.forEach(DeviceBlock::release);                   // some stay in s1's cache
            assertThat(pool.metrics().cachedBytes()).isPositive();

            DeviceBlock whole = pool.allocate(32 * MIB, s0);

            assertThat(pool.metrics().reservedBytes()).as("no growth: s1's cache went back and merged")
                    .isEqualTo(32 * MIB);
            assertThat(pool.metrics().cachedBytes()).isZero();
            whole.release();
        }
    }

    @Test
    void aStreamCachesAtMostItsShareOfLiveBytes() {
        try (DevicePool pool = new DevicePool(source, FRUGAL)) {
            pool.allocate(8 * MIB, s0).release();
            assertThat(pool.metrics().cachedBytes()).as("8 MiB is above a quarter of the 8 MiB floor").isZero();
            pool.allocate(2 * MIB, s0).release();
            assertThat(pool.metrics().cachedBytes()).isEqualTo(2 * MIB);
        }
        try (DevicePool lazy = new DevicePool(new FakeChunkSource(8 * GIB), io.gpupool.replay.ReplayStrategies.lazy256())) {
            lazy.allocate(8 * MIB, s0).release();
            assertThat(lazy.metrics().cachedBytes()).as("LAZY keeps the fixed per-stream cap").isEqualTo(8 * MIB);
        }
    }

    @Test
    void aDedicatedChunkReplacesEmptyBuddyChunksInsteadOfAddingToThem() {
        try (DevicePool pool = new DevicePool(source, FRUGAL)) {
            pool.allocate(30 * MIB, s0).release();
            assertThat(pool.metrics().reservedBytes()).isEqualTo(32 * MIB);

            DeviceBlock large = pool.allocate(100 * MIB, s0);

            assertThat(pool.metrics().reservedBytes()).isEqualTo(100 * MIB);
            assertThat(pool.metrics().peakReservedBytes()).isEqualTo(100 * MIB);
            large.release();
        }
    }

    @Test
    void aLargeRequestTakesAdjacentMaximumBlocksOfTheWarmUpChunkInsteadOfADedicatedChunk() {
        try (DevicePool pool = new DevicePool(source, FRUGAL)) {
            pool.reserve(256 * MIB);                                // warm-up: one chunk of 8 maximum blocks
            DeviceBlock small = pool.allocate(30 * MIB, s0);        // block 0
            DeviceBlock large = pool.allocate(100 * MIB, s1);       // 4 blocks from 32 MiB on, tail trimmed

            assertThat(pool.metrics().reservedBytes()).isEqualTo(256 * MIB);
            assertThat(source.requests()).containsExactly(256 * MIB);
            assertThat(large.size()).isEqualTo(100 * MIB);
            assertThat(large.address()).isEqualTo(small.address() + 32 * MIB);
            assertThat(pool.metrics().globalFreeBytes()).isEqualTo(256 * MIB - 100 * MIB - 30 * MIB);

            large.release();
            assertThat(pool.metrics().cachedBytes()).as("spans never enter a local cache").isZero();
            small.release();
            PoolInvariants.freeSpaceIsWholeChunks(pool);
            DeviceBlock again = pool.allocate(250 * MIB, s0);       // the whole chunk is one span again
            assertThat(source.requests()).containsExactly(256 * MIB);
            again.release();
        }
    }

    @Test
    void adjacentFreeMaximumBlocksOfOneChunkCountAsOneContiguousRange() {
        PoolConfig lazy = FRUGAL.withGrowth(GrowthPolicy.LAZY, 0);   // one 256 MiB chunk, 32 MiB blocks
        try (DevicePool pool = new DevicePool(source, lazy.withMode(AllocatorMode.GLOBAL_ONLY))) {
            DeviceBlock first = pool.allocate(32 * MIB, s0);
            assertThat(pool.metrics().reservedBytes()).isEqualTo(256 * MIB);
            assertThat(pool.metrics().globalFreeBytes()).isEqualTo(224 * MIB);
            assertThat(pool.metrics().largestFreeBlockBytes()).isEqualTo(224 * MIB);
            assertThat(pool.metrics().fragmentation()).isZero();

            DeviceBlock middle = pool.allocate(32 * MIB, s0);       // offset 32 MiB
            first.release();                                        // free: [0,32) and [64,256)
            assertThat(pool.metrics().largestFreeBlockBytes()).isEqualTo(192 * MIB);
            assertThat(pool.metrics().fragmentation()).isCloseTo(1.0 - 192.0 / 224.0, org.assertj.core.data.Offset.offset(1e-9));
            middle.release();
        }
    }

    @Test
    void onDemandNeedsLessMemoryThanLazyDoublingOnAVariableSizeInferenceTrace() {
        Trace trace = new InferenceTraceGenerator(InferenceTraceGenerator.Config.bertBase().withRequests(150)).generate();
        TraceReplayer.Result onDemand = TraceReplayer.replay(trace, ReplayStrategies.byName("two-level"), 141L << 30);
        TraceReplayer.Result frugal = TraceReplayer.replay(trace,
                new TraceReplayer.Strategy("frugal", s -> new DevicePool(s, FRUGAL)), 141L << 30);
        TraceReplayer.Result lazy = TraceReplayer.replay(trace,
                new TraceReplayer.Strategy("lazy", s -> new DevicePool(s, io.gpupool.replay.ReplayStrategies.lazy256())), 141L << 30);

        assertThat(onDemand.failedAllocations()).isZero();
        assertThat(frugal.failedAllocations()).isZero();
        // same 256 MiB blocks as the lazy configuration: growing on demand alone must save memory
        assertThat(onDemand.overhead()).as("default vs lazy %.3f", lazy.overhead()).isLessThan(lazy.overhead() * 0.75);
        assertThat(frugal.overhead()).isLessThan(1.25).isLessThan(lazy.overhead() / 2);
    }
}
