package io.gpupool.memory.pool;

import io.gpupool.memory.BudgetReclaim;
import io.gpupool.memory.DeviceBlock;
import io.gpupool.memory.PoolConfig;
import io.gpupool.memory.PoolTuning;
import io.gpupool.memory.metric.AllocatorMode;
import org.junit.jupiter.api.Test;

import static io.gpupool.memory.PoolConfig.GIB;
import static io.gpupool.memory.PoolConfig.MIB;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * Memory that no queued work uses any more needs no fence when it leaves its stream: a block released with
 * {@link DeviceBlock#releaseSettled} (the server's request arena, freed after the request synchronised its
 * stream), and anything freed before a host synchronisation that has returned since. The server's streams are
 * busy with their next request whenever another stream's map reclaims their caches; a fence recorded then would
 * keep memory nothing uses mapped until that request ends.
 */
class SettledReleaseTest {

    private final FakeChunkSource source = new FakeChunkSource(8 * GIB, true);
    private final ModelStream first = new ModelStream(0);
    private final ModelStream second = new ModelStream(1);

    private static PoolConfig onMap() {
        return GranuleExtents.defaults().apply(PoolTuning.builder().budgetReclaim(BudgetReclaim.ON_MAP).build());
    }

    /** One request on {@code stream}: its work queued on the arena, the host synchronises, the arena goes back. */
    private static void finishRequest(ModelStream stream, DeviceBlock arena, boolean settled) {
        stream.enqueue();
        stream.synchronize();
        if (settled) {
            arena.releaseSettled();
        } else {
            arena.release();
        }
    }

    @Test
    void underOnMapABusyStreamsSettledArenaIsUnmappedForAnotherStreamsLargerOneAndAPlainReleaseIsNot() {
        for (boolean settled : new boolean[] {true, false}) {
            ModelStream a = new ModelStream(0);
            ModelStream b = new ModelStream(1);
            try (DevicePool pool = new DevicePool(new FakeChunkSource(8 * GIB, true), onMap())) {
                DeviceBlock arenaA = pool.allocateArena(40 * MIB, a);
                DeviceBlock arenaB = pool.allocateArena(40 * MIB, b);   // high water 80 MiB: budget 96 MiB
                finishRequest(a, arenaA, settled);
                finishRequest(b, arenaB, settled);
                assertThat(pool.metrics().cachedBytes()).as("each stream keeps its arena").isEqualTo(80 * MIB);
                long running = a.enqueue();                             // a's next request runs on the device
                DeviceBlock larger = pool.allocateArena(60 * MIB, b);  // 20 MiB more to map: beyond the budget
                if (settled) {
                    assertThat(pool.metrics().reservedBytes()).as("a's idle arena unmapped: only b's run is left")
                            .isEqualTo(60 * MIB);
                    assertThat(pool.metrics().cachedBytes()).isZero();
                } else {
                    assertThat(pool.metrics().reservedBytes())
                            .as("a's arena now waits for a's running request: it stays mapped beside b's run")
                            .isEqualTo(100 * MIB);
                }
                assertThat(a.orderedAfter(running, b)).as("nobody waited for a's running request").isFalse();
                finishRequest(b, larger, settled);
                a.synchronize();
            }
        }
    }

    @Test
    void aSettledBlockLeavesItsStreamWithoutAFenceAndAPlainOneUnderAFenceOfItsStream() {
        // lazy fences off: the plain release's fence is then recorded at the free, where the test can count it
        PoolConfig eager = GranuleExtents.defaults().withMode(AllocatorMode.GLOBAL_ONLY).withLazyFences(false);
        try (DevicePool pool = new DevicePool(source, eager)) {
            DeviceBlock settled = pool.allocate(8 * MIB, first);
            DeviceBlock plain = pool.allocate(8 * MIB, first);
            first.enqueue();
            first.synchronize();
            long next = first.enqueue();                               // work queued after the sync, on neither block
            settled.releaseSettled();
            assertThat(first.recorded).as("no fence for the settled block").isZero();
            plain.release();
            assertThat(first.recorded).as("a plain release cannot know: the fence covers the queued work").isEqualTo(1);
            assertThat(pool.metrics().counters().frees()).isEqualTo(2);
            assertThat(first.orderedAfter(next, second)).isFalse();
            first.synchronize();
        }
    }

    @Test
    void aCacheFlushedAfterItsStreamSynchronisedRecordsNoFenceThoughTheStreamIsBusyAgain() {
        try (DevicePool pool = new DevicePool(source, GranuleExtents.defaults())) {
            DeviceBlock block = pool.allocate(8 * MIB, first);
            first.enqueue();                                           // a kernel using the block
            block.release();                                           // freed while the kernel may still run
            first.synchronize();                                       // the request's end
            long running = first.enqueue();                            // the next request
            assertThat(pool.metrics().cachedBytes()).isEqualTo(8 * MIB);
            pool.trim();
            assertThat(first.recorded).as("the cache was settled by the sync: no fence").isZero();
            assertThat(pool.metrics().reservedBytes()).as("given back at once").isZero();
            assertThat(first.orderedAfter(running, second)).as("trim did not wait for the next request").isFalse();
            first.synchronize();
        }
    }

    @Test
    void aCacheFlushedBeforeTheSyncReturnedStillWaitsForTheWorkThatUsedItsMemory() {
        try (DevicePool pool = new DevicePool(source, GranuleExtents.defaults())) {
            DeviceBlock block = pool.allocate(8 * MIB, first);
            long using = first.enqueue();
            block.release();
            pool.trim();
            assertThat(first.recorded).as("a fence after the kernel that used the block").isEqualTo(1);
            assertThat(first.orderedAfter(using, second)).as("trim waited for it before unmapping").isTrue();
            assertThat(pool.metrics().reservedBytes()).isZero();
        }
    }
}
