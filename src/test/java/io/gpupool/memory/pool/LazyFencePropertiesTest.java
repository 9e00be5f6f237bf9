package io.gpupool.memory.pool;

import io.gpupool.memory.DeviceBlock;
import io.gpupool.memory.GrowthPolicy;
import io.gpupool.memory.OutOfDeviceMemoryException;
import io.gpupool.memory.PoolConfig;
import io.gpupool.memory.PoolTuning;
import io.gpupool.memory.metric.AllocatorMode;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Combinators;
import net.jqwik.api.ForAll;
import net.jqwik.api.From;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.Tuple;
import net.jqwik.api.constraints.Size;

import java.util.ArrayList;
import java.util.List;

import static io.gpupool.memory.PoolConfig.GIB;
import static io.gpupool.memory.PoolConfig.MIB;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * Random takes, frees, device progress and host synchronisations on three streams under
 * {@code lazyFences}: no stream is ever handed memory before the other streams' work on it is done
 * or ordered before its own ({@link FreedRanges}), the pool stays sound, and it drains to nothing.
 */
class LazyFencePropertiesTest {

    /** kind 0..4 take, 5..7 use and free, 8 device progress, 9 synchronise, 10 housekeeping. */
    record Action(int kind, long bytes, int stream, int pick) {
    }

    @Provide
    Arbitrary<Action> actions() {
        Arbitrary<Long> bytes = Arbitraries.frequencyOf(
                Tuple.of(3, Arbitraries.longs().between(1, 2 * MIB)),
                Tuple.of(6, Arbitraries.longs().between(2 * MIB, 32 * MIB)),
                Tuple.of(1, Arbitraries.longs().between(32 * MIB + 1, 80 * MIB)));
        return Combinators.combine(Arbitraries.integers().between(0, 10), bytes, Arbitraries.integers().between(0, 2),
                Arbitraries.integers().between(0, 10_000)).as(Action::new);
    }

    private record Live(DeviceBlock block, ModelStream stream) {
    }

    @Property(tries = 100)
    void crossStreamReuseWaitsForTheFreeingStreamAndThePoolDrains(
            @ForAll @Size(max = 250) List<@From("actions") Action> actions,
            @ForAll boolean twoLevel, @ForAll boolean mapped, @ForAll boolean tightCap) {
        FakeChunkSource source = new FakeChunkSource(GIB, mapped);
        PoolConfig config = PoolConfig.defaults().withBlocks(2 * MIB, 32 * MIB)
                .apply(PoolTuning.builder().growthStepBytes(64 * MIB).maxGrowthStepBytes(256 * MIB)
                        .localCacheCountPerClass(2).localCacheBytesPerStream(32 * MIB).coalesceThreshold(3).build())
                .withMode(twoLevel ? AllocatorMode.TWO_LEVEL : AllocatorMode.GLOBAL_ONLY)
                .withGrowth(mapped ? GrowthPolicy.MAPPED : GrowthPolicy.ON_DEMAND, 0)
                .withLazyFences(true);
        if (tightCap) {                     // little memory: streams often take what another just freed
            config = config.apply(PoolTuning.builder().capBytes(96 * MIB).build());
        }
        ModelStream[] streams = {new ModelStream(0), new ModelStream(1), new ModelStream(2)};
        FreedRanges freed = new FreedRanges();
        DevicePool pool = new DevicePool(source, config);
        List<Live> live = new ArrayList<>();
        for (Action action : actions) {
            ModelStream stream = streams[action.stream()];
            if (action.kind() <= 4) {
                try {
                    DeviceBlock block = pool.allocate(action.bytes(), stream);
                    freed.taken(block, stream);
                    live.add(new Live(block, stream));
                } catch (OutOfDeviceMemoryException e) {
                    assertThat(e.getMessage()).contains("tried to allocate");
                }
            } else if (action.kind() <= 7) {
                if (!live.isEmpty()) {
                    Live taken = live.remove(action.pick() % live.size());
                    freed.freed(taken.block(), taken.stream(), taken.stream().enqueue());
                    taken.block().release();
                }
            } else if (action.kind() == 8) {
                stream.progress(stream.queued() - action.pick() % 3);
            } else if (action.kind() == 9) {
                stream.synchronize();
            } else {
                switch (action.pick() % 3) {
                    case 0 -> pool.maintain();
                    case 1 -> pool.trim();
                    default -> pool.detachStream(stream);
                }
            }
            List<DeviceBlock> blocks = live.stream().map(Live::block).toList();
            PoolInvariants.liveBlocksAreSound(blocks, source);
            PoolInvariants.accountingHolds(pool, blocks, source);
        }
        live.forEach(l -> l.block().release());
        live.clear();
        PoolInvariants.accountingHolds(pool, List.of(), source);
        pool.trim();
        assertThat(source.liveChunks()).isZero();
        assertThat(pool.metrics().reservedBytes()).isZero();
        pool.close();
        for (ModelStream stream : streams) {
            assertThat(stream.closed).as("fences of stream " + stream.ordinal() + " closed").isEqualTo(stream.recorded);
        }
    }
}
