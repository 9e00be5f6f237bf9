package io.gpupool.memory.pool;

import io.gpupool.memory.DeviceBlock;
import io.gpupool.memory.PoolConfig;
import io.gpupool.memory.metric.AllocatorMode;
import org.junit.jupiter.api.Test;

import static io.gpupool.memory.PoolConfig.GIB;
import static io.gpupool.memory.PoolConfig.KIB;
import static io.gpupool.memory.PoolConfig.MIB;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * Request arenas ({@code DeviceAllocator.allocateArena}): one block per forward, of a size that changes from
 * request to request. Below the minimum block the pool hands out a whole one, so that a stream's cache serves
 * the next arena whatever its size.
 */
class RequestArenaPoolTest {

    /** Arena sizes of short requests (batch 1–4, tens of tokens): all below the 2 MiB minimum block, all different. */
    private static final long[] SHORT_ARENAS = {300 * KIB, 90 * KIB, 1500 * KIB, 40 * KIB, 700 * KIB, 1900 * KIB,
            260 * KIB, 1100 * KIB, 12 * KIB, 520 * KIB};

    private final FakeChunkSource source = new FakeChunkSource(8 * GIB, true);
    private final TestStream stream = new TestStream(0);

    @Test
    void smallArenasOfEverySizeAreServedFromTheStreamsCacheWithoutMappingAgain() {
        try (DevicePool pool = new DevicePool(source, GranuleExtents.defaults())) {
            pool.allocateArena(SHORT_ARENAS[0], stream).release();
            long maps = pool.metrics().mapCalls();
            long hits = pool.metrics().counters().localHits();
            for (int round = 0; round < 3; round++) {
                for (long bytes : SHORT_ARENAS) {
                    DeviceBlock arena = pool.allocateArena(bytes, stream);
                    assertThat(arena.size()).as("a whole minimum block").isEqualTo(2 * MIB);
                    assertThat(arena.requestedBytes()).isEqualTo(bytes);
                    arena.release();
                }
            }
            assertThat(pool.metrics().counters().localHits() - hits).as("every arena a local hit")
                    .isEqualTo(3L * SHORT_ARENAS.length);
            assertThat(pool.metrics().mapCalls()).as("nothing mapped after the first").isEqualTo(maps);
            assertThat(pool.metrics().reservedBytes()).as("one block in use at a time").isEqualTo(2 * MIB);
        }
    }

    @Test
    void theSameSizesAsOrdinaryAllocationsTakeTheirSmallObjectClasses() {
        try (DevicePool pool = new DevicePool(source, GranuleExtents.defaults())) {
            for (long bytes : SHORT_ARENAS) {
                DeviceBlock block = pool.allocate(bytes, stream);
                assertThat(block.size()).as("%d B", bytes).isEqualTo(pool.blockBytes(bytes)).isLessThan(2 * MIB);
                block.release();
            }
        }
    }

    @Test
    void anArenaTakesExactlyWhatTheAdmissionChargesForIt() {
        try (DevicePool pool = new DevicePool(source, GranuleExtents.defaults())) {
            for (long bytes : new long[] {256, 300 * KIB, 2 * MIB, 5 * MIB, 70 * MIB, 300 * MIB}) {
                DeviceBlock arena = pool.allocateArena(bytes, stream);
                assertThat(arena.size()).as("%d B", bytes).isEqualTo(pool.arenaBlockBytes(bytes));
                arena.release();
            }
            assertThat(pool.arenaBlockBytes(5 * MIB)).as("a run: rounded as any run").isEqualTo(pool.blockBytes(5 * MIB));
        }
    }

    @Test
    void withoutLocalCachesAnArenaIsAnOrdinaryAllocation() {
        try (DevicePool pool = new DevicePool(source, GranuleExtents.defaults().withMode(AllocatorMode.GLOBAL_ONLY))) {
            DeviceBlock arena = pool.allocateArena(300 * KIB, stream);
            assertThat(arena.size()).isEqualTo(pool.blockBytes(300 * KIB)).isEqualTo(pool.arenaBlockBytes(300 * KIB))
                    .isLessThan(2 * MIB);
            arena.release();
        }
    }

    @Test
    void anArenaOfNoBytesIsRefusedAndLeavesNothingBehind() {
        try (DevicePool pool = new DevicePool(source, GranuleExtents.defaults())) {
            assertThatThrownBy(() -> pool.allocateArena(0, stream)).isInstanceOf(IllegalArgumentException.class)
                    .hasMessageContaining("bytes = 0");
            assertThat(pool.arenaBlockBytes(0)).isZero();
            assertThat(pool.metrics().allocatedBytes()).isZero();
        }
    }
}
