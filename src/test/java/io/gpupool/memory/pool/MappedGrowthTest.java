package io.gpupool.memory.pool;

import io.gpupool.memory.metric.AllocatorMode;
import io.gpupool.memory.BudgetReclaim;
import io.gpupool.memory.ChunkSource;
import io.gpupool.memory.DeviceBlock;
import io.gpupool.memory.GrowthPolicy;
import io.gpupool.memory.OutOfDeviceMemoryException;
import io.gpupool.memory.PoolConfig;
import io.gpupool.memory.PoolTuning;

import io.gpupool.memory.source.FaultInjectingChunkSource;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;

import static io.gpupool.memory.PoolConfig.GIB;
import static io.gpupool.memory.PoolConfig.MIB;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/** GrowthPolicy.MAPPED: buddy chunks in address space, memory mapped under runs only, reclaimed beyond the slack. */
class MappedGrowthTest {

    /**
     * The defaults with a fence recorded at every free: these tests model a device whose fences complete
     * as {@link TestStream} says, and a lazy fence would wait for a synchronisation TestStream never reports
     * (LazyFenceTest covers lazy fences).
     */
    private static PoolConfig eagerFences() {
        return GranuleExtents.defaults().withLazyFences(false);
    }


    private final FakeChunkSource source = new FakeChunkSource(8 * GIB, true);
    private final TestStream s0 = new TestStream(0);
    private final TestStream s1 = new TestStream(1);

    @Test
    void onlyTheGranulesUnderABlockCostMemory() {
        try (DevicePool pool = new DevicePool(source, eagerFences())) {
            DeviceBlock block = pool.allocate(10 * MIB, s0);
            assertThat(pool.metrics().reservedBytes()).as("mapped: 10 MiB, not a 256 MiB chunk").isEqualTo(10 * MIB);
            assertThat(source.liveBytes()).isEqualTo(10 * MIB);
            assertThat(pool.metrics().addressSpaceBytes()).isGreaterThanOrEqualTo(GIB);
            assertThat(source.contains(block.address(), block.size())).isTrue();
            DeviceBlock large = pool.allocate(300 * MIB, s1);       // above the maximum block: a span, mapped too
            assertThat(pool.metrics().reservedBytes()).as("+ nineteen 16 MiB extents").isEqualTo(10 * MIB + 304 * MIB);
            assertThat(source.contains(large.address(), large.size())).isTrue();
            block.release();
            large.release();
            assertThat(pool.trim()).isEqualTo(314 * MIB);
            assertThat(pool.metrics().reservedBytes()).isZero();
            assertThat(source.mappedGranules()).isZero();
        }
        assertThat(source.addressRanges()).as("address space given back at close").isZero();
    }

    @Test
    void freedMemoryIsReusedWithoutMappingAgain() {
        try (DevicePool pool = new DevicePool(source, eagerFences().withMode(AllocatorMode.GLOBAL_ONLY))) {
            pool.allocate(40 * MIB, s0).release();
            long maps = pool.metrics().mapCalls();
            DeviceBlock again = pool.allocate(40 * MIB, s1);
            assertThat(pool.metrics().mapCalls()).as("a mapped free block serves the same size").isEqualTo(maps);
            assertThat(pool.metrics().reservedBytes()).isEqualTo(40 * MIB);
            again.release();
        }
    }

    @Test
    void atTheCapAStreamWaitsForAnotherStreamsMemoryRatherThanRecover() {
        PoolConfig config = eagerFences().withMode(AllocatorMode.GLOBAL_ONLY)
                .apply(PoolTuning.builder().capBytes(64 * MIB).build());
        try (DevicePool pool = new DevicePool(source, config)) {
            DeviceBlock held = pool.allocate(32 * MIB, s1);
            DeviceBlock first = pool.allocate(32 * MIB, s0);       // the cap is now fully mapped
            s0.pending = true;
            first.release();
            DeviceBlock other = pool.allocate(32 * MIB, s1);
            assertThat(other.address()).as("the fenced block, not fresh memory").isEqualTo(first.address());
            assertThat(s0.fences.getLast().waiters).containsExactly(s1);
            assertThat(pool.metrics().counters().recoveries()).isZero();
            other.release();
            held.release();
            s0.fences.getLast().complete = true;
        }
    }

    /** With waitBeyondBudget too, the cap (not only the budget) sends a stream to a wait before a recovery. */
    @Test
    void withWaitBeyondBudgetTheCapStillComesFirstWhenTheBudgetLiesAboveIt() {
        PoolConfig config = eagerFences().withMode(AllocatorMode.GLOBAL_ONLY).withWaitBeyondBudget(true)
                .apply(PoolTuning.builder().capBytes(64 * MIB).build());
        try (DevicePool pool = new DevicePool(source, config)) {
            DeviceBlock held = pool.allocate(24 * MIB, s1);
            DeviceBlock first = pool.allocate(32 * MIB, s0);       // 56 MiB mapped; budget 56 + 16 = 72 > cap
            s0.pending = true;
            first.release();
            DeviceBlock other = pool.allocate(16 * MIB, s1);        // 72 MiB would pass the cap, not the budget
            assertThat(other.address()).as("part of the fenced block, not fresh memory").isEqualTo(first.address());
            assertThat(s0.fences.getLast().waiters).containsExactly(s1);
            assertThat(pool.metrics().counters().recoveries()).isZero();
            other.release();
            held.release();
            s0.fences.getLast().complete = true;
        }
    }

    @Test
    void theMappedSlackIsTunedAtRuntimeAndBoundsWhatMaintenanceKeepsMapped() {
        PoolConfig config = eagerFences().withMode(AllocatorMode.GLOBAL_ONLY)
                .apply(PoolTuning.builder().releaseIdleAge(java.time.Duration.ZERO).mappedSlack(1.0).build());
        try (DevicePool pool = new DevicePool(source, config)) {
            List<DeviceBlock> blocks = new ArrayList<>();
            for (int i = 0; i < 40; i++) {
                blocks.add(pool.allocate(8 * MIB, s0));
            }
            for (int i = 0; i < 20; i++) {
                blocks.remove(blocks.size() - 1).release();
            }
            assertThat(pool.metrics().reservedBytes()).isEqualTo(320 * MIB);
            pool.maintain();                                        // slack 1.0: 160 MiB live may keep 160 free
            assertThat(pool.metrics().reservedBytes()).isEqualTo(320 * MIB);
            assertThat(pool.tune(PoolTuning.builder().mappedSlack(0.25).build()).mappedSlack()).isEqualTo(0.25);
            pool.maintain();
            assertThat(pool.metrics().reservedBytes()).as("160 MiB live + a quarter")
                    .isBetween(160 * MIB, 200 * MIB);
            assertThatThrownBy(() -> pool.tune(PoolTuning.builder().mappedSlack(1.5).build()))
                    .isInstanceOf(IllegalArgumentException.class)
                    .hasMessage("gpupool.memory.mappedSlack = 1.5 is invalid; allowed: [0, 1]");
            assertThat(pool.config().mappedSlack()).as("a rejected tuning changes nothing").isEqualTo(0.25);
            blocks.forEach(DeviceBlock::release);
        }
    }

    /**
     * The 32 units of a 64 MiB run share the fence of the free that returned them: the stream that
     * freed the run takes it back without a wait (checking and gathering the units' fences once per
     * run, not per unit), another stream taking it waits for that fence exactly once, and the fence
     * is closed once nothing holds it.
     */
    @Test
    void aLargeRunsUnitsShareOneFenceWhenTakenBackOrByAnotherStream() {
        PoolConfig config = eagerFences().withMode(AllocatorMode.GLOBAL_ONLY)
                .apply(PoolTuning.builder().capBytes(64 * MIB).build());
        try (DevicePool pool = new DevicePool(source, config)) {
            s0.pending = true;
            DeviceBlock first = pool.allocate(64 * MIB, s0);
            first.release();
            DeviceBlock again = pool.allocate(64 * MIB, s0);
            assertThat(again.address()).as("its own freed run, no fresh memory").isEqualTo(first.address());
            assertThat(s0.fences.getFirst().waiters).as("its own work is ordered: no wait").isEmpty();
            again.release();
            DeviceBlock other = pool.allocate(64 * MIB, s1);       // the cap leaves no room to map more
            assertThat(other.address()).isEqualTo(first.address());
            assertThat(s0.fences.getLast().waiters).as("one wait for the 32 units' one fence").containsExactly(s1);
            other.release();
            s0.fences.forEach(f -> f.complete = true);
        }
        assertThat(s0.fences).allSatisfy(f -> assertThat(f.closed).as("every fence closed").isTrue());
    }

    @Test
    void aStreamMapsFreshMemoryRatherThanWaitForAnotherStreamsWork() {
        try (DevicePool pool = new DevicePool(source, eagerFences().withMode(AllocatorMode.GLOBAL_ONLY))) {
            DeviceBlock first = pool.allocate(40 * MIB, s0);
            s0.pending = true;                                      // s0's kernels still use it
            first.release();
            long maps = pool.metrics().mapCalls();
            DeviceBlock other = pool.allocate(40 * MIB, s1);
            assertThat(other.address()).isNotEqualTo(first.address());
            assertThat(pool.metrics().mapCalls()).as("fresh memory was mapped").isGreaterThan(maps);
            assertThat(s0.fences.getLast().waiters).as("s1 does not wait for s0").isEmpty();
            assertThat(pool.metrics().crossStreamWaits()).isZero();
            other.release();
            s0.fences.getLast().complete = true;
        }
    }

    /**
     * A stream whose work still runs takes back the block it freed itself (no wait, stream order), so
     * the clear block stays for another stream and nobody maps more.
     */
    @Test
    void aStreamTakesBackWhatItFreedWhileItsWorkRunsAndLeavesClearMemoryToOthers() {
        try (DevicePool pool = new DevicePool(source, eagerFences().withMode(AllocatorMode.GLOBAL_ONLY))) {
            DeviceBlock low = pool.allocate(8 * MIB, s0);
            DeviceBlock high = pool.allocate(8 * MIB, s0);
            low.release();                                          // s0 had nothing queued: clear
            s0.pending = true;
            high.release();                                         // s0's kernels still use it
            long maps = pool.metrics().mapCalls();
            DeviceBlock again = pool.allocate(8 * MIB, s0);
            assertThat(again.address()).as("its own freed block, not the lower clear one").isEqualTo(high.address());
            DeviceBlock other = pool.allocate(8 * MIB, s1);
            assertThat(other.address()).as("the clear block, no wait for s0").isEqualTo(low.address());
            assertThat(pool.metrics().crossStreamWaits()).isZero();
            assertThat(pool.metrics().mapCalls()).isEqualTo(maps);
            assertThat(pool.metrics().reservedBytes()).isEqualTo(16 * MIB);
            again.release();
            other.release();
            s0.fences.forEach(f -> f.complete = true);
        }
    }

    /** A span (above the maximum block) goes where memory is still mapped rather than to the lowest free address space. */
    @Test
    void aSpanReusesTheMappedSpanItsStreamFreedRatherThanMapAnother() {
        try (DevicePool pool = new DevicePool(source, eagerFences().withMode(AllocatorMode.GLOBAL_ONLY))) {
            DeviceBlock first = pool.allocate(300 * MIB, s0);
            DeviceBlock second = pool.allocate(300 * MIB, s0);
            first.release();
            pool.trim();                                            // first's span is unmapped, second's stays live
            s0.pending = true;
            second.release();                                       // mapped, under s0's fence
            long maps = pool.metrics().mapCalls();
            long reserved = pool.metrics().reservedBytes();
            DeviceBlock again = pool.allocate(300 * MIB, s0);
            assertThat(again.address()).isEqualTo(second.address());
            assertThat(pool.metrics().mapCalls()).as("nothing mapped").isEqualTo(maps);
            assertThat(pool.metrics().reservedBytes()).isEqualTo(reserved);
            again.release();
            DeviceBlock other = pool.allocate(300 * MIB, s1);
            assertThat(other.address()).as("another stream does not wait for s0's span").isNotEqualTo(second.address());
            assertThat(pool.metrics().crossStreamWaits()).isZero();
            other.release();
            s0.fences.forEach(f -> f.complete = true);
        }
    }

    /** Free mapped memory whose last user's work is still queued is reported as fenced until that work is done. */
    @Test
    void freedMemoryIsReportedFencedUntilTheStreamsWorkCompletes() {
        try (DevicePool pool = new DevicePool(source, eagerFences().withMode(AllocatorMode.GLOBAL_ONLY))) {
            DeviceBlock done = pool.allocate(8 * MIB, s0);
            DeviceBlock queued = pool.allocate(40 * MIB, s0);
            done.release();
            assertThat(pool.metrics().globalFreeBytes()).isEqualTo(8 * MIB);
            assertThat(pool.metrics().fencedFreeBytes()).as("s0 had nothing queued").isZero();
            s0.pending = true;
            queued.release();
            assertThat(pool.metrics().fencedFreeBytes()).isEqualTo(40 * MIB);
            s0.fences.getLast().complete = true;
            assertThat(pool.metrics().fencedFreeBytes()).isZero();
            assertThat(pool.metrics().globalFreeBytes()).isEqualTo(48 * MIB);
        }
    }

    /** With waitBeyondBudget (tuned at runtime), mapping past the budget gives way to a wait on the stream that freed memory. */
    @Test
    void beyondTheBudgetAStreamCanBeMadeToWaitRatherThanMapMore() {
        try (DevicePool pool = new DevicePool(source, eagerFences().withMode(AllocatorMode.GLOBAL_ONLY))) {
            assertThat(pool.tune(PoolTuning.builder().waitBeyondBudget(true).build()).waitBeyondBudget()).isTrue();
            DeviceBlock first = pool.allocate(40 * MIB, s0);
            s0.pending = true;
            first.release();
            long maps = pool.metrics().mapCalls();
            DeviceBlock other = pool.allocate(40 * MIB, s1);        // 80 MiB would pass 40 MiB + 16 MiB of slack
            assertThat(other.address()).as("s0's freed block, not fresh memory").isEqualTo(first.address());
            assertThat(pool.metrics().mapCalls()).isEqualTo(maps);
            assertThat(s0.fences.getLast().waiters).as("s1 waits for s0 on the device").containsExactly(s1);
            assertThat(pool.metrics().crossStreamWaits()).isEqualTo(1);
            assertThat(pool.metrics().reservedBytes()).isEqualTo(40 * MIB);
            DeviceBlock small = pool.allocate(8 * MIB, s0);         // within the budget: mapped, no wait
            assertThat(pool.metrics().crossStreamWaits()).isEqualTo(1);
            small.release();
            other.release();
            s0.fences.getLast().complete = true;
        }
    }

    /**
     * Many sizes freed in a scattered order leave free mapped memory in pieces; the pool never holds
     * more than the high-water mark of allocated bytes plus its slack (1/16, at least 8 minimum blocks),
     * plus what it cannot unmap: at most one partly used extent ({@link MappedGrowth#LARGE_EXTENT_BYTES}) per live block.
     */
    @Test
    void mappedMemoryStaysWithinTheHighWaterMarkPlusTheSlack() {
        try (DevicePool pool = new DevicePool(source, eagerFences().withMode(AllocatorMode.GLOBAL_ONLY))) {
            Random random = new Random(7);
            List<DeviceBlock> live = new ArrayList<>();
            long highWater = 0;
            long worstExcess = 0;
            for (int step = 0; step < 4000; step++) {
                if (live.size() < 40 && (live.isEmpty() || random.nextInt(100) < 55)) {
                    long bytes = (2 + random.nextInt(120)) * MIB + random.nextInt(1 << 20);
                    live.add(pool.allocate(bytes, random.nextBoolean() ? s0 : s1));
                } else {
                    live.remove(random.nextInt(live.size())).release();
                }
                long allocated = pool.metrics().allocatedBytes();
                highWater = Math.max(highWater, allocated);
                long slack = Math.max(16 * MIB, highWater / 16);
                long partlyUsedExtents = live.size() * MappedGrowth.LARGE_EXTENT_BYTES;
                worstExcess = Math.max(worstExcess, pool.metrics().reservedBytes() - highWater - slack - partlyUsedExtents);
            }
            assertThat(worstExcess).as("mapped beyond high water + slack").isLessThanOrEqualTo(0);
            assertThat(pool.metrics().unmapCalls()).as("the reclaimer had to work").isPositive();
            live.forEach(DeviceBlock::release);
            PoolInvariants.freeSpaceIsWholeChunks(pool);
        }
    }

    @Test
    void aRefusedMapRunsRecoveryThenFailsWithTheUsualMessageAndLeavesNothingBehind() {
        source.limit = 100 * MIB;
        try (DevicePool pool = new DevicePool(source, eagerFences())) {
            DeviceBlock kept = pool.allocate(60 * MIB, s0);
            DeviceBlock cached = pool.allocate(20 * MIB, s0);
            cached.release();                                      // free, mapped: recovery must unmap it
            DeviceBlock fits = pool.allocate(38 * MIB, s1);        // 60 + 20 + 38 > 100: needs the 20 back
            assertThat(source.liveBytes()).isLessThanOrEqualTo(100 * MIB);
            assertThatThrownBy(() -> pool.allocate(50 * MIB, s1))
                    .isInstanceOf(OutOfDeviceMemoryException.class)
                    .hasMessageContaining("tried to allocate 50.00 MiB")
                    .hasMessageContaining("largest free block");
            assertThat(pool.metrics().allocatedBytes()).isEqualTo(98 * MIB);
            kept.release();
            fits.release();
            assertThat(pool.metrics().allocatedBytes()).isZero();
            DeviceBlock after = pool.allocate(90 * MIB, s1);       // the refused run went back: space is whole
            after.release();
        }
    }

    @Test
    void injectedMapFailuresNeverLeakARun() {
        FaultInjectingChunkSource faulty = new FaultInjectingChunkSource(source).failWithProbability(0.3, 11);
        try (DevicePool pool = new DevicePool(faulty, eagerFences())) {
            int failed = 0;
            for (int i = 0; i < 200; i++) {
                try {
                    pool.allocate((1 + i % 40) * 3 * MIB, i % 2 == 0 ? s0 : s1).release();
                } catch (OutOfDeviceMemoryException e) {
                    failed++;
                }
            }
            assertThat(failed).isPositive();
            assertThat(pool.metrics().allocatedBytes()).isZero();
            pool.trim();
            assertThat(source.mappedGranules()).isZero();
        }
    }

    /**
     * A map beyond the budget when the global level holds no free mapped memory it may take (class comment, step 4):
     * under ON_MAP the allocating thread takes back another stream's cache, its reserve too, and unmaps it; under
     * PERIODIC the map goes ahead and the cache stays.
     */
    @Test
    void underOnMapAMapBeyondTheBudgetTakesBackAnotherStreamsCacheAndUnderPeriodicItDoesNot() {
        for (BudgetReclaim reclaim : BudgetReclaim.values()) {
            FakeChunkSource fresh = new FakeChunkSource(8 * GIB, true);
            TestStream first = new TestStream(0);
            TestStream second = new TestStream(1);
            PoolConfig config = eagerFences().apply(PoolTuning.builder().budgetReclaim(reclaim).build());
            try (DevicePool pool = new DevicePool(fresh, config)) {
                DeviceBlock mine = pool.allocate(40 * MIB, first);
                pool.allocate(40 * MIB, second).release();          // high water 80 MiB: budget 96 MiB
                first.pending = true;
                mine.release();
                assertThat(pool.metrics().cachedBytes()).as("%s: each stream keeps its run", reclaim).isEqualTo(80 * MIB);
                DeviceBlock larger = pool.allocate(60 * MIB, first);  // first's 40 MiB and 20 more: 100 MiB mapped
                if (reclaim == BudgetReclaim.ON_MAP) {
                    assertThat(pool.metrics().cachedBytes()).as("the second stream's reserve taken back").isZero();
                    assertThat(pool.metrics().unmapCalls()).isPositive();
                    assertThat(pool.metrics().reservedBytes()).isEqualTo(60 * MIB);
                } else {
                    assertThat(pool.metrics().cachedBytes()).as("the second stream's reserve stays").isEqualTo(40 * MIB);
                    assertThat(pool.metrics().unmapCalls()).isZero();
                    assertThat(pool.metrics().reservedBytes()).isEqualTo(100 * MIB);
                }
                larger.release();
                first.fences.forEach(f -> f.complete = true);
            }
        }
    }

    /**
     * PERIODIC budget reclaim: the allocation that maps beyond the budget makes no unmap call; the next
     * maintenance brings the mapped bytes back to the budget; a map that would pass the cap still makes
     * room first.
     */
    @Test
    void withPeriodicReclaimAllocationsMapBeyondTheBudgetAndMaintenanceUnmaps() {
        PoolConfig config = eagerFences().withMode(AllocatorMode.GLOBAL_ONLY)
                .apply(PoolTuning.builder().budgetReclaim(BudgetReclaim.PERIODIC).capBytes(1024 * MIB).build());
        try (DevicePool pool = new DevicePool(source, config)) {
            List<DeviceBlock> first = new ArrayList<>();
            for (int i = 0; i < 20; i++) {
                first.add(pool.allocate(8 * MIB, s0));             // high-water 160 MiB: budget 176 MiB
            }
            s0.pending = true;                                     // s0's kernels still use what it frees
            first.forEach(DeviceBlock::release);                   // 160 MiB free and mapped, fenced by s0
            List<DeviceBlock> second = new ArrayList<>();
            for (int i = 0; i < 20; i++) {
                second.add(pool.allocate(8 * MIB, s1));            // s1 need not wait: it maps fresh memory
            }
            assertThat(pool.metrics().reservedBytes()).as("mapped beyond the budget").isGreaterThan(300 * MIB);
            assertThat(pool.metrics().unmapCalls()).as("no allocation unmapped").isZero();
            s0.fences.forEach(f -> f.complete = true);
            s0.pending = false;
            pool.maintain();
            assertThat(pool.metrics().reservedBytes()).as("maintenance: down to the budget (160 + 16 MiB)")
                    .isLessThanOrEqualTo(176 * MIB);
            assertThat(pool.metrics().unmapCalls()).isPositive();
            second.forEach(DeviceBlock::release);

            List<DeviceBlock> large = new ArrayList<>();
            for (int i = 0; i < 12; i++) {
                large.add(pool.allocate(64 * MIB, s0));            // 768 MiB live
            }
            large.subList(0, 6).forEach(DeviceBlock::release);
            large.subList(0, 6).clear();
            long unmapsBefore = pool.metrics().unmapCalls();
            List<DeviceBlock> more = new ArrayList<>();
            for (int i = 0; i < 8; i++) {
                more.add(pool.allocate(64 * MIB, s1));             // past the cap only by unmapping what s0 freed
            }
            assertThat(pool.metrics().reservedBytes()).isLessThanOrEqualTo(1024 * MIB);
            assertThat(pool.metrics().unmapCalls()).as("the cap made room on the allocating thread")
                    .isGreaterThan(unmapsBefore);
            large.forEach(DeviceBlock::release);
            more.forEach(DeviceBlock::release);
        }
    }

    @Test
    void maintainGivesMemoryBackOnceDemandFellForTheReleaseIdleAge() {
        PoolConfig config = eagerFences().apply(PoolTuning.builder().releaseIdleAge(java.time.Duration.ZERO).build());
        try (DevicePool pool = new DevicePool(source, config)) {
            List<DeviceBlock> live = new ArrayList<>();
            for (int i = 0; i < 10; i++) {
                live.add(pool.allocate(50 * MIB, s0));
            }
            live.forEach(DeviceBlock::release);
            assertThat(pool.metrics().reservedBytes()).isEqualTo(500 * MIB);   // kept: within the budget
            pool.maintain();
            assertThat(pool.metrics().reservedBytes()).as("after maintain, demand is 0: the floor remains at most")
                    .isLessThanOrEqualTo(16 * MIB + 4 * 8 * MIB);
        }
    }

    @Test
    void sixteenStreamsAllocatingAtOnceKeepBlocksMappedAndDisjoint() throws Exception {
        FakeChunkSource tight = new FakeChunkSource(8 * GIB, true);
        try (DevicePool pool = new DevicePool(tight, eagerFences())) {
            ExecutorService threads = Executors.newFixedThreadPool(16);
            List<Future<?>> done = new ArrayList<>();
            List<DeviceBlock> everything = java.util.Collections.synchronizedList(new ArrayList<>());
            for (int t = 0; t < 16; t++) {
                TestStream stream = new TestStream(t);
                int seed = t;
                done.add(threads.submit(() -> {
                    Random random = new Random(seed);
                    List<DeviceBlock> mine = new ArrayList<>();
                    for (int i = 0; i < 600; i++) {
                        if (mine.size() < 8 && random.nextInt(100) < 60) {
                            long bytes = random.nextInt(4) == 0 ? 1 + random.nextInt(1 << 20)
                                    : (1 + random.nextInt(60)) * MIB;
                            DeviceBlock block = pool.allocate(bytes, stream);
                            assertThat(tight.contains(block.address(), block.size())).as("mapped").isTrue();
                            mine.add(block);
                            everything.add(block);
                        } else if (!mine.isEmpty()) {
                            DeviceBlock block = mine.remove(random.nextInt(mine.size()));
                            everything.remove(block);
                            block.release();
                        }
                        if (i % 97 == 0 && seed == 0) {
                            pool.maintain();
                        }
                    }
                    synchronized (everything) {
                        PoolInvariants.liveBlocksAreSound(new ArrayList<>(everything), tight);
                    }
                    mine.forEach(b -> {
                        everything.remove(b);
                        b.release();
                    });
                    return null;
                }));
            }
            for (Future<?> f : done) {
                f.get();
            }
            threads.shutdown();
            assertThat(pool.metrics().allocatedBytes()).isZero();
            pool.trim();
            assertThat(tight.mappedGranules()).isZero();
        }
    }

    /** Operators read what growing costs: the host time inside the driver's map and unmap calls is counted. */
    @Test
    void hostTimeInMapAndUnmapCallsIsCounted() {
        long callNanos = 2_000_000;
        ChunkSource slow = new io.gpupool.memory.source.ForwardingChunkSource(source) {
            @Override
            protected io.gpupool.memory.VirtualMemory decorate(io.gpupool.memory.VirtualMemory upstreamMemory) {
                return new io.gpupool.memory.source.ForwardingVirtualMemory(upstreamMemory) {
                    @Override
                    public void map(long address, long bytes, long extentBytes) {
                        pause();
                        super.map(address, bytes, extentBytes);
                    }

                    @Override
                    public void unmap(long address, long bytes) {
                        pause();
                        super.unmap(address, bytes);
                    }
                };
            }

            private void pause() {
                long end = System.nanoTime() + callNanos;          // parkNanos may return early: park until the end
                for (long left = callNanos; left > 0; left = end - System.nanoTime()) {
                    java.util.concurrent.locks.LockSupport.parkNanos(left);
                }
            }
        };
        try (DevicePool pool = new DevicePool(slow, eagerFences())) {
            assertThat(pool.metrics().mapNanos()).isZero();
            pool.allocate(10 * MIB, s0).release();
            pool.allocate(300 * MIB, s1).release();
            long maps = pool.metrics().mapCalls();
            assertThat(maps).isPositive();
            assertThat(pool.metrics().mapNanos()).isGreaterThanOrEqualTo(maps * callNanos);
            assertThat(pool.metrics().unmapNanos()).isZero();
            pool.trim();
            long unmaps = pool.metrics().unmapCalls();
            assertThat(unmaps).isPositive();
            assertThat(pool.metrics().unmapNanos()).isGreaterThanOrEqualTo(unmaps * callNanos);
        }
    }

    /**
     * Under MAPPED a stream's local cache holds at most its share of half the allocated bytes: with
     * little live, a freed 16 MiB block goes back to the global level where every stream can take it;
     * with 1 GiB live on another stream, the same block stays in the stream's cache for reuse.
     */
    @Test
    void aStreamCachesAtMostItsShareOfHalfTheAllocatedBytes() {
        try (DevicePool pool = new DevicePool(source, eagerFences())) {
            DeviceBlock older = pool.allocate(8 * MIB, s0);
            DeviceBlock small = pool.allocate(8 * MIB, s0);
            older.release();
            assertThat(pool.metrics().cachedBytes()).as("16 MiB live: the share is below the 8 MiB floor").isZero();
            small.release();
            assertThat(pool.metrics().cachedBytes()).as("the stream's last run stays, as its reserve (RunReserve)")
                    .isEqualTo(8 * MIB);
            assertThat(pool.metrics().localCacheCapBytes()).as("operators see the cap in force").isEqualTo(8 * MIB);
            List<DeviceBlock> live = new ArrayList<>();
            for (int i = 0; i < 4; i++) {
                live.add(pool.allocate(256 * MIB, s1));            // each large allocation samples the share
            }
            DeviceBlock again = pool.allocate(16 * MIB, s0);
            again.release();
            assertThat(pool.metrics().cachedBytes()).as("1 GiB live over 2 streams: a share of 256 MiB")
                    .isEqualTo(16 * MIB);
            assertThat(pool.metrics().localCacheCapBytes()).isEqualTo(256 * MIB);
            live.forEach(DeviceBlock::release);
        }
    }
}
