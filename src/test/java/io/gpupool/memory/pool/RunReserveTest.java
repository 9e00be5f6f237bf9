package io.gpupool.memory.pool;

import io.gpupool.memory.DeviceBlock;
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
import net.jqwik.api.constraints.Size;
import org.junit.jupiter.api.Test;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

import static io.gpupool.memory.PoolConfig.GIB;
import static io.gpupool.memory.PoolConfig.MIB;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * A stream's reserve ({@link RunReserve}): runs of varying size on one stream, as request arenas allocate them,
 * served from the stream's own cache, and what it holds given back when the stream no longer needs it.
 */
class RunReserveTest {

    private final FakeChunkSource source = new FakeChunkSource(8 * GIB, true);
    private final TestStream s0 = new TestStream(0);
    private final TestStream s1 = new TestStream(1);

    private DevicePool pool() {
        return new DevicePool(source, GranuleExtents.defaults());
    }

    @Test
    void smallerArenasAfterALargerOneAreLocalHitsCarvedFromIt() {
        try (DevicePool pool = pool()) {
            DeviceBlock first = pool.allocate(40 * MIB, s0);
            long base = first.address();
            first.release();
            long maps = pool.metrics().mapCalls();
            long hits = pool.metrics().counters().localHits();
            for (long mib : new long[] {20, 33, 12, 40, 5, 38}) {
                DeviceBlock arena = pool.allocate(mib * MIB, s0);
                assertThat(arena.address()).as("%d MiB from the start of the stream's reserve", mib).isEqualTo(base);
                assertThat(arena.size()).as("held in whole units, no power-of-two rounding")
                        .isEqualTo((mib + mib % 2) * MIB);
                arena.release();
            }
            assertThat(pool.metrics().counters().localHits() - hits).as("every one a local hit").isEqualTo(6);
            assertThat(pool.metrics().mapCalls()).as("no map for any of them").isEqualTo(maps);
            assertThat(pool.metrics().reservedBytes()).isEqualTo(40 * MIB);
        }
    }

    @Test
    void aCarvedArenaMergesBackSoTheWholeReserveServesAgain() {
        try (DevicePool pool = pool()) {
            DeviceBlock first = pool.allocate(40 * MIB, s0);
            long base = first.address();
            first.release();
            DeviceBlock small = pool.allocate(10 * MIB, s0);
            assertThat(pool.metrics().cachedBytes()).as("the remainder waits in the cache").isEqualTo(30 * MIB);
            small.release();
            assertThat(pool.metrics().cachedBytes()).isEqualTo(40 * MIB);
            DeviceBlock whole = pool.allocate(40 * MIB, s0);
            assertThat(whole.address()).isEqualTo(base);
            assertThat(pool.metrics().cachedBytes()).isZero();
            whole.release();
        }
    }

    @Test
    void aLargerArenaGivesTheTooSmallReserveBackAndBecomesTheReserve() {
        try (DevicePool pool = pool()) {
            pool.allocate(20 * MIB, s0).release();
            assertThat(pool.metrics().cachedBytes()).isEqualTo(20 * MIB);
            DeviceBlock larger = pool.allocate(50 * MIB, s0);
            assertThat(pool.metrics().cachedBytes()).as("the 20 MiB reserve went to the global level").isZero();
            larger.release();
            assertThat(pool.metrics().cachedBytes()).isEqualTo(50 * MIB);
            DeviceBlock again = pool.allocate(30 * MIB, s0);
            assertThat(again.address()).isEqualTo(larger.address());
            again.release();
        }
    }

    @Test
    void aLargeRunLeavesTheReserveForTheNextArenaSoNeitherMaps() {
        try (DevicePool pool = pool()) {
            // a large run freed first, so that the one below is served without a map: a map beyond the pool's
            // budget would reclaim every cache, this reserve included, and the test would show nothing
            DeviceBlock earlier = pool.allocate(MappedGrowth.LARGE_RUN_BYTES, s0);
            DeviceBlock first = pool.allocate(40 * MIB, s0);
            long base = first.address();
            earlier.release();
            first.release();
            long maps = pool.metrics().mapCalls();
            DeviceBlock large = pool.allocate(MappedGrowth.LARGE_RUN_BYTES, s0);
            long cachedWhileLarge = pool.metrics().cachedBytes();
            large.release();
            long hits = pool.metrics().counters().localHits();
            DeviceBlock next = pool.allocate(30 * MIB, s0);
            long nextAddress = next.address();
            next.release();
            assertThat(cachedWhileLarge).as("the 40 MiB reserve stays while the large run is out").isEqualTo(40 * MIB);
            assertThat(nextAddress).as("carved from the reserve kept across the large run").isEqualTo(base);
            assertThat(pool.metrics().counters().localHits() - hits).isEqualTo(1);
            assertThat(pool.metrics().mapCalls()).as("no map for either request").isEqualTo(maps);
        }
    }

    @Test
    void aReserveKeptAcrossLargeRunsStillGoesWhenIdle() throws InterruptedException {
        PoolConfig idleSoon = GranuleExtents.defaults().apply(PoolTuning.builder()
                .localIdleAge(Duration.ofMillis(50)).build());
        try (DevicePool pool = new DevicePool(source, idleSoon)) {
            DeviceBlock earlier = pool.allocate(MappedGrowth.LARGE_RUN_BYTES, s0);
            DeviceBlock first = pool.allocate(40 * MIB, s0);
            earlier.release();
            first.release();
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
            while (pool.metrics().cachedBytes() > 0 && System.nanoTime() < deadline) {
                pool.allocate(MappedGrowth.LARGE_RUN_BYTES, s0).release();   // large runs only: the reserve idles
                Thread.sleep(10);
                pool.maintain();
            }
            assertThat(pool.metrics().cachedBytes()).as("the idle sweep took the reserve no request used").isZero();
        }
    }

    @Test
    void aReserveAboveTheConfiguredBytesGoesOnTheNextRequestEvenALargeOne() {
        try (DevicePool pool = pool()) {
            DeviceBlock earlier = pool.allocate(MappedGrowth.LARGE_RUN_BYTES, s0);
            DeviceBlock first = pool.allocate(40 * MIB, s0);
            earlier.release();
            first.release();
            pool.tune(PoolTuning.builder().localCacheBytesPerStream(16 * MIB).build());
            DeviceBlock large = pool.allocate(MappedGrowth.LARGE_RUN_BYTES, s0);
            assertThat(pool.metrics().cachedBytes()).as("40 MiB is above the 16 MiB a stream may now keep").isZero();
            large.release();
        }
    }

    @Test
    void aReserveShrinksToTheStreamsRecentArenas() {
        try (DevicePool pool = pool()) {
            pool.allocate(60 * MIB, s0).release();
            for (int i = 0; i < 2 * RunReserve.WINDOW + 1; i++) {
                pool.allocate(10 * MIB, s0).release();
            }
            assertThat(pool.metrics().cachedBytes()).as("60 MiB given up for the 10 MiB the stream asks now")
                    .isEqualTo(10 * MIB);
            assertThat(pool.metrics().globalFreeBytes()).as("the rest is free in the global level").isEqualTo(50 * MIB);
        }
    }

    @Test
    void anotherStreamDoesNotGetTheReserveButTrimTakesIt() {
        try (DevicePool pool = pool()) {
            DeviceBlock first = pool.allocate(40 * MIB, s0);
            long base = first.address();
            first.release();
            DeviceBlock other = pool.allocate(20 * MIB, s1);
            assertThat(other.address()).as("s0's reserve stays s0's").isNotEqualTo(base);
            other.release();
            pool.trim();
            assertThat(pool.metrics().cachedBytes()).isZero();
            assertThat(pool.metrics().reservedBytes()).isZero();
        }
    }

    @Test
    void largeRunsAndGlobalOnlyModeKeepNoReserve() {
        try (DevicePool pool = pool()) {
            pool.allocate(MappedGrowth.LARGE_RUN_BYTES, s0).release();
            assertThat(pool.metrics().cachedBytes()).as("a run of a large chunk unmaps in whole extents only").isZero();
        }
        try (DevicePool pool = new DevicePool(source, GranuleExtents.defaults().withMode(AllocatorMode.GLOBAL_ONLY))) {
            pool.allocate(40 * MIB, s0).release();
            assertThat(pool.metrics().cachedBytes()).isZero();
        }
    }

    /** One step of a stream running arenas: release its arena, if any, then maybe take the next one. */
    record Step(int stream, long bytes, int housekeeping) {
    }

    @Provide
    Arbitrary<Step> steps() {
        return Combinators.combine(Arbitraries.integers().between(0, 2),
                Arbitraries.longs().between(1, 80 * MIB), Arbitraries.integers().between(0, 40)).as(Step::new);
    }

    @Property(tries = 60)
    void arenasOfAnySizeOnSeveralStreamsKeepThePoolSound(@ForAll @Size(max = 200) List<@From("steps") Step> steps) {
        FakeChunkSource fake = new FakeChunkSource(4 * GIB, true);
        TestStream[] streams = {new TestStream(0), new TestStream(1), new TestStream(2)};
        DeviceBlock[] arenas = new DeviceBlock[streams.length];
        DevicePool pool = new DevicePool(fake, GranuleExtents.defaults());
        for (Step step : steps) {
            if (arenas[step.stream()] != null) {
                arenas[step.stream()].release();
                arenas[step.stream()] = null;
            }
            switch (step.housekeeping()) {
                case 0 -> pool.trim();
                case 1 -> pool.maintain();
                case 2 -> pool.flushAndCoalesce();
                default -> arenas[step.stream()] = pool.allocate(step.bytes(), streams[step.stream()]);
            }
            List<DeviceBlock> live = new ArrayList<>();
            for (DeviceBlock arena : arenas) {
                if (arena != null) {
                    live.add(arena);
                    assertThat(arena.size()).isLessThan(arena.requestedBytes() + 2 * MIB);
                }
            }
            PoolInvariants.liveBlocksAreSound(live, fake);
            PoolInvariants.accountingHolds(pool, live, fake);
        }
        for (int i = 0; i < arenas.length; i++) {
            if (arenas[i] != null) {
                arenas[i].release();
            }
        }
        PoolInvariants.accountingHolds(pool, List.of(), fake);
        PoolInvariants.freeSpaceIsWholeChunks(pool);
        pool.trim();
        assertThat(pool.metrics().reservedBytes()).isZero();
        assertThat(fake.mappedGranules()).isZero();
        pool.close();
    }
}
