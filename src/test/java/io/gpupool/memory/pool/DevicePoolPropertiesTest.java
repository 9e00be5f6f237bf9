package io.gpupool.memory.pool;

import io.gpupool.memory.metric.AllocatorMode;
import io.gpupool.memory.DeviceBlock;
import io.gpupool.memory.GrowthPolicy;
import io.gpupool.memory.OutOfDeviceMemoryException;
import io.gpupool.memory.PoolConfig;
import io.gpupool.memory.PoolTuning;

import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Combinators;
import net.jqwik.api.ForAll;
import net.jqwik.api.From;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.Tuple;
import net.jqwik.api.constraints.IntRange;
import net.jqwik.api.constraints.Size;

import java.util.ArrayList;
import java.util.List;

import static io.gpupool.memory.PoolConfig.GIB;
import static io.gpupool.memory.PoolConfig.MIB;
import static org.assertj.core.api.Assertions.assertThat;

/** Random allocate / release / maintenance sequences against the invariants of {@link PoolInvariants}. */
class DevicePoolPropertiesTest {

    /** kind 0..5 allocate, 6..8 release, 9 housekeeping (see {@link #run}). */
    record Action(int kind, long bytes, int stream, int pick) {
    }

    @Provide
    Arbitrary<Action> actions() {
        Arbitrary<Long> bytes = Arbitraries.frequencyOf(
                Tuple.of(5, Arbitraries.longs().between(1, 2 * MIB)),
                Tuple.of(4, Arbitraries.longs().between(2 * MIB, 32 * MIB)),
                Tuple.of(1, Arbitraries.longs().between(32 * MIB + 1, 80 * MIB)));
        return Combinators.combine(Arbitraries.integers().between(0, 9), bytes, Arbitraries.integers().between(0, 3),
                Arbitraries.integers().between(0, 10_000)).as(Action::new);
    }

    @Property(tries = 80)
    void randomSequencesKeepThePoolSound(@ForAll @Size(max = 250) List<@From("actions") Action> actions,
                                         @ForAll boolean twoLevel,
                                         @ForAll @IntRange(min = 0, max = 150) int initialMiB,
                                         @ForAll boolean mapped,
                                         @ForAll boolean retain,
                                         @ForAll boolean tightCap) {
        FakeChunkSource source = new FakeChunkSource(GIB, mapped);
        PoolConfig config = PoolConfig.defaults().withBlocks(2 * MIB, 32 * MIB)
                .apply(PoolTuning.builder().growthStepBytes(64 * MIB).maxGrowthStepBytes(256 * MIB)
                        .localCacheCountPerClass(4).localCacheBytesPerStream(64 * MIB)
                        .coalesceThreshold(3).build())
                .withMode(twoLevel ? AllocatorMode.TWO_LEVEL : AllocatorMode.GLOBAL_ONLY);
        if (mapped) {              // MAPPED: address-space chunks, memory mapped under runs, reclaim
            config = config.withGrowth(GrowthPolicy.MAPPED, initialMiB * MIB)
                    .withRetainedHandleBytes(retain ? 64 * MIB : 0);   // unmapped memory kept to map again
        } else if (initialMiB > 0) {      // HYBRID: an odd first chunk (e.g. 150 MiB = 128 + 16 + 4 + 2) exercises the roots
            config = config.withGrowth(GrowthPolicy.HYBRID, initialMiB * MIB);
        } else {
            config = config.withGrowth(GrowthPolicy.ON_DEMAND, 0);
        }
        if (tightCap) {            // out-of-memory is common: slab runs refused, small classes served from larger ones
            config = config.apply(PoolTuning.builder().capBytes(Math.max(32, (initialMiB + 3) & ~1) * MIB).build());
        }
        TestStream[] streams = {new TestStream(0), new TestStream(1), new TestStream(2), new TestStream(3)};
        DevicePool pool = new DevicePool(source, config);
        List<DeviceBlock> live = new ArrayList<>();
        for (Action action : actions) {
            run(action, pool, live, streams);
            PoolInvariants.liveBlocksAreSound(live, source);
            PoolInvariants.accountingHolds(pool, live, source);
        }
        live.forEach(DeviceBlock::release);
        live.clear();
        PoolInvariants.accountingHolds(pool, live, source);
        PoolInvariants.freeSpaceIsWholeChunks(pool);
        pool.trim();
        assertThat(source.liveChunks()).isZero();
        assertThat(source.mappedGranules()).as("mapped granules after trim").isZero();
        assertThat(source.physicalHandles()).as("physical handles after trim").isZero();
        assertThat(pool.metrics().reservedBytes()).isZero();
        pool.close();
        for (TestStream stream : streams) {
            assertThat(stream.fences).allSatisfy(f -> assertThat(f.closed).as("fence closed").isTrue());
        }
    }

    private static void run(Action action, DevicePool pool, List<DeviceBlock> live, TestStream[] streams) {
        TestStream stream = streams[action.stream()];
        if (action.kind() <= 5) {
            try {
                live.add(pool.allocate(action.bytes(), stream));
            } catch (OutOfDeviceMemoryException e) {
                assertThat(e.getMessage()).contains("tried to allocate");
            }
        } else if (action.kind() <= 8) {
            if (!live.isEmpty()) {
                live.remove(action.pick() % live.size()).release();
            }
        } else {
            switch (action.pick() % 4) {
                case 0 -> pool.maintain();
                case 1 -> pool.trim();
                case 2 -> stream.pending = !stream.pending;     // the stream's work may still be running
                default -> pool.detachStream(stream);
            }
        }
    }
}
