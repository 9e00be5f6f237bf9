package io.gpupool.memory.pool;

import io.gpupool.memory.DeviceBlock;
import io.gpupool.memory.PoolConfig;
import io.gpupool.memory.metric.AllocatorMode;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;

import static io.gpupool.memory.PoolConfig.GIB;
import static io.gpupool.memory.PoolConfig.MIB;
import static org.assertj.core.api.Assertions.assertThat;

/** Frees into the global level under {@code lazyFences}: a fence only when another stream needs one. */
class LazyFenceTest {

    private final FakeChunkSource source = new FakeChunkSource(8 * GIB);
    private final ModelStream s = new ModelStream(0);
    private final ModelStream t = new ModelStream(1);
    private final ModelStream filler = new ModelStream(2);
    private final FreedRanges freed = new FreedRanges();

    private static PoolConfig globalOnly(boolean lazy) {
        return DevicePoolTest.lazy256().withMode(AllocatorMode.GLOBAL_ONLY).withLazyFences(lazy);
    }

    /** Takes the rest of the pool's free memory, so that the next request gets what was freed last. */
    private static List<DeviceBlock> fill(DevicePool pool, ModelStream stream) {
        List<DeviceBlock> fillers = new ArrayList<>();
        while (pool.metrics().globalFreeBytes() > 0) {
            fillers.add(pool.allocate(8 * MIB, stream));
        }
        return fillers;
    }

    /** {@code stream} runs one item of work on {@code block}, then frees it. */
    private void useAndFree(DeviceBlock block, ModelStream stream) {
        freed.freed(block, stream, stream.enqueue());
        block.release();
    }

    @Test
    void aBlockAnotherStreamTakesComesAfterTheFreeingStreamsWorkUpToTheFree() {
        try (DevicePool pool = new DevicePool(source, globalOnly(true))) {
            DeviceBlock a = pool.allocate(8 * MIB, s);
            List<DeviceBlock> fillers = fill(pool, filler);
            useAndFree(a, s);
            assertThat(s.recorded).as("the free records nothing").isZero();
            s.enqueue();                                        // s goes on with other work
            DeviceBlock b = pool.allocate(8 * MIB, t);          // a's units are the only free memory
            assertThat(b.address()).isEqualTo(a.address());
            assertThat(s.recorded).as("recorded on s when t took the block").isEqualTo(1);
            freed.taken(b, t);                                  // t waits for s's work on it
            assertThat(pool.metrics().crossStreamWaits()).isEqualTo(1);
            b.release();
            fillers.forEach(DeviceBlock::release);
        }
        assertThat(s.closed).as("every fence closed").isEqualTo(s.recorded);
    }

    @Test
    void aBlockItsOwnStreamTakesBackNeedsNoFence() {
        try (DevicePool pool = new DevicePool(source, globalOnly(true))) {
            for (int i = 0; i < 100; i++) {
                DeviceBlock block = pool.allocate(8 * MIB, s);
                freed.taken(block, s);
                useAndFree(block, s);
            }
            assertThat(s.recorded).isZero();
            assertThat(pool.metrics().crossStreamWaits()).isZero();
        }
    }

    @Test
    void afterTheFreeingStreamSynchronisedNoFenceIsRecordedAtAll() {
        try (DevicePool pool = new DevicePool(source, globalOnly(true))) {
            DeviceBlock a = pool.allocate(8 * MIB, s);
            List<DeviceBlock> fillers = fill(pool, filler);
            useAndFree(a, s);
            s.synchronize();                                    // the request's end
            DeviceBlock b = pool.allocate(8 * MIB, t);
            assertThat(b.address()).isEqualTo(a.address());
            freed.taken(b, t);
            assertThat(s.recorded).isZero();
            assertThat(pool.metrics().crossStreamWaits()).as("nothing to wait for").isZero();
            b.release();
            fillers.forEach(DeviceBlock::release);
            t.synchronize();                                    // every request ended: nothing to await
            filler.synchronize();
            pool.trim();
            assertThat(source.liveChunks()).isZero();
        }
        assertThat(s.recorded + t.recorded + filler.recorded).as("events recorded, even by trim and close").isZero();
    }

    @Test
    void blocksFreedBetweenTwoSynchronisationsShareOneFenceSoTakingThemAllRecordsOneEvent() {
        try (DevicePool pool = new DevicePool(source, globalOnly(true))) {
            List<DeviceBlock> mine = new ArrayList<>();
            for (int i = 0; i < 10; i++) {
                mine.add(pool.allocate(8 * MIB, s));
            }
            List<DeviceBlock> fillers = fill(pool, filler);
            mine.forEach(block -> useAndFree(block, s));
            List<DeviceBlock> taken = new ArrayList<>();
            for (int i = 0; i < 10; i++) {
                DeviceBlock block = pool.allocate(8 * MIB, t);
                freed.taken(block, t);                          // t waits for s's work on every one of them
                taken.add(block);
            }
            assertThat(s.recorded).as("one event on s stands for all ten frees").isEqualTo(1);
            taken.forEach(DeviceBlock::release);
            fillers.forEach(DeviceBlock::release);
        }
        assertThat(s.closed).as("every fence closed").isEqualTo(s.recorded);
    }

    @Test
    void aFreeAfterTheSharedFenceWasRecordedGetsAFenceOfItsOwn() {
        try (DevicePool pool = new DevicePool(source, globalOnly(true))) {
            DeviceBlock first = pool.allocate(8 * MIB, s);
            DeviceBlock second = pool.allocate(8 * MIB, s);
            DeviceBlock kept = pool.allocate(8 * MIB, s);
            List<DeviceBlock> fillers = fill(pool, filler);
            useAndFree(first, s);
            useAndFree(kept, s);                                // keeps the shared fence alive
            DeviceBlock took = pool.allocate(8 * MIB, t);       // records the shared fence on s
            assertThat(took.address()).isEqualTo(first.address());
            freed.taken(took, t);
            useAndFree(second, s);                              // work queued after that record
            DeviceBlock tookSecond = pool.allocate(8 * MIB, t);
            assertThat(tookSecond.address()).isEqualTo(second.address());
            freed.taken(tookSecond, t);                         // fails if the recorded event had stood for it
            assertThat(s.recorded).isEqualTo(2);
            DeviceBlock tookKept = pool.allocate(8 * MIB, t);
            freed.taken(tookKept, t);
            List.of(took, tookSecond, tookKept).forEach(DeviceBlock::release);
            fillers.forEach(DeviceBlock::release);
        }
        assertThat(s.closed).isEqualTo(s.recorded);
    }

    @Test
    void aFreeAfterASynchronisationGetsAFenceOfItsOwn() {
        try (DevicePool pool = new DevicePool(source, globalOnly(true))) {
            DeviceBlock first = pool.allocate(8 * MIB, s);
            DeviceBlock second = pool.allocate(8 * MIB, s);
            DeviceBlock third = pool.allocate(8 * MIB, s);
            List<DeviceBlock> fillers = fill(pool, filler);
            useAndFree(first, s);                               // its fence stays open on the free block
            s.synchronize();
            useAndFree(second, s);                              // after the synchronisation: not covered by it
            third.release();                                    // keeps nothing but the second free's block in reach
            DeviceBlock took = pool.allocate(8 * MIB, t);
            DeviceBlock tookToo = pool.allocate(8 * MIB, t);
            DeviceBlock tookThree = pool.allocate(8 * MIB, t);
            for (DeviceBlock block : List.of(took, tookToo, tookThree)) {
                freed.taken(block, t);                          // fails if the synchronised fence stood for the second
            }
            took.release();
            tookToo.release();
            tookThree.release();
            fillers.forEach(DeviceBlock::release);
        }
        assertThat(s.closed).isEqualTo(s.recorded);
    }

    @Test
    void memoryAStreamFreedBeforeGoingIdleIsGivenBackByMaintenance() {
        PoolConfig config = PoolConfig.defaults().withMode(AllocatorMode.GLOBAL_ONLY).apply(
                io.gpupool.memory.PoolTuning.builder().releaseIdleAge(java.time.Duration.ZERO).build());
        try (DevicePool pool = new DevicePool(new FakeChunkSource(8 * GIB, true), config)) {
            List<DeviceBlock> live = new ArrayList<>();
            for (int i = 0; i < 10; i++) {
                live.add(pool.allocate(50 * MIB, s));
            }
            long last = s.enqueue();
            live.forEach(DeviceBlock::release);
            s.progress(last);                                   // the device finished; the host never synchronises s again
            pool.maintain();
            assertThat(pool.metrics().reservedBytes()).as("given back though s never synchronised after the frees")
                    .isLessThanOrEqualTo(16 * MIB + 4 * 8 * MIB);
            assertThat(s.recorded).as("one fence stood for all ten frees").isEqualTo(1);
        }
        assertThat(s.closed).isEqualTo(s.recorded);
    }

    @Test
    void aSynchronisationAlreadyRunningAtTheFreeDoesNotClearIt() {
        io.gpupool.memory.SyncMarks marks = new io.gpupool.memory.SyncMarks();
        long running = marks.begin();                           // a synchronisation begins ...
        long mark = marks.mark();                               // ... memory is freed while it waits ...
        marks.returned(running);                                // ... and it returns
        assertThat(marks.since(mark)).isFalse();
        long next = marks.begin();
        marks.returned(next);
        assertThat(marks.since(mark)).isTrue();
        marks.closed();
        assertThat(marks.since(Long.MAX_VALUE - 1)).isTrue();
    }

    @Test
    void anotherStreamPrefersMemoryNobodyNeedsToFenceForIt() {
        try (DevicePool pool = new DevicePool(source, globalOnly(true))) {
            DeviceBlock a = pool.allocate(8 * MIB, s);
            useAndFree(a, s);
            DeviceBlock b = pool.allocate(8 * MIB, t);
            assertThat(b.address()).as("other free units of the chunk are clear").isNotEqualTo(a.address());
            freed.taken(b, t);
            assertThat(s.recorded).isZero();
            b.release();
        }
    }

    @Test
    void inAPoolOfOneBlockAnotherStreamTakesThatBlockAndWaits() {
        // the set-up of CudaBackendGpuTest's lazy fence test, where a kernel on s still writes the block
        PoolConfig oneBlock = PoolConfig.defaults().withBlocks(2 * MIB, 4 * MIB)
                .withGrowth(io.gpupool.memory.GrowthPolicy.EAGER, 4 * MIB)
                .apply(io.gpupool.memory.PoolTuning.builder().capBytes(4 * MIB).build())
                .withMode(AllocatorMode.GLOBAL_ONLY).withLazyFences(true);
        try (DevicePool pool = new DevicePool(source, oneBlock)) {
            DeviceBlock a = pool.allocate(4 * MIB, s);
            useAndFree(a, s);
            DeviceBlock b = pool.allocate(4 * MIB, t);
            assertThat(b.address()).isEqualTo(a.address());
            freed.taken(b, t);
            assertThat(s.recorded).isEqualTo(1);
            b.release();
        }
    }

    @Test
    void trimWaitsForTheWorkOnMemoryItGivesBack() {
        try (DevicePool pool = new DevicePool(source, globalOnly(true))) {
            DeviceBlock a = pool.allocate(8 * MIB, s);
            long item = s.enqueue();
            a.release();
            pool.trim();
            assertThat(source.liveChunks()).isZero();
            assertThat(s.orderedAfter(item, t)).as("the host awaited s's work before giving the chunk back").isTrue();
            assertThat(s.recorded).isEqualTo(1);
        }
        assertThat(s.closed).isEqualTo(s.recorded);
    }

    @Test
    void withTheSettingOffEveryFreeRecordsAFence() {
        try (DevicePool pool = new DevicePool(source, globalOnly(false))) {
            for (int i = 0; i < 10; i++) {
                DeviceBlock block = pool.allocate(8 * MIB, s);
                useAndFree(block, s);
            }
            assertThat(s.recorded).isEqualTo(10);
        }
        assertThat(PoolConfig.defaults().lazyFences()).as("the default").isTrue();
    }
}
