package io.gpupool.memory.pool;

import io.gpupool.memory.metric.AllocatorMode;
import io.gpupool.memory.DeviceBlock;
import io.gpupool.memory.GrowthPolicy;
import io.gpupool.memory.OutOfDeviceMemoryException;
import io.gpupool.memory.PoolConfig;
import io.gpupool.memory.PoolTuning;

import io.gpupool.memory.metric.AllocatorCounters;
import io.gpupool.memory.metric.PoolMetrics;
import org.junit.jupiter.api.Test;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

import static io.gpupool.memory.PoolConfig.GIB;
import static io.gpupool.memory.PoolConfig.MIB;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class DevicePoolTest {

    private final FakeChunkSource source = new FakeChunkSource(8 * GIB);
    private final TestStream s0 = new TestStream(0);
    private final TestStream s1 = new TestStream(1);

    /**
     * The defaults before ON_DEMAND growth became the default: LAZY doubling chunks from 256 MiB and
     * a 256 MiB maximum block. Most tests here state that policy's behaviour (ON_DEMAND has its own
     * tests in {@link OnDemandGrowthTest}).
     */
    /** The replay's LAZY-growth strategy, with a fence recorded at every free (TestStream reports no synchronisations). */
    static PoolConfig lazy256() {
        return io.gpupool.replay.ReplayStrategies.lazy256().withLazyFences(false);
    }

    private static PoolConfig globalOnly() {
        return lazy256().withMode(AllocatorMode.GLOBAL_ONLY);
    }

    @Test
    void tailTrimmingKeepsTenMebibytesOfASixteenMebibyteBlock() {
        try (DevicePool pool = new DevicePool(source, globalOnly())) {
            DeviceBlock ten = pool.allocate(10 * MIB, s0);
            assertThat(ten.size()).isEqualTo(10 * MIB);
            assertThat(pool.metrics().globalFreeBytes()).isEqualTo(256 * MIB - 10 * MIB);
            // the trimmed tail [10, 16) MiB is free: a 2 MiB and a 4 MiB request land right behind the block
            DeviceBlock two = pool.allocate(2 * MIB, s0);
            DeviceBlock four = pool.allocate(4 * MIB, s0);
            assertThat(two.address()).isEqualTo(ten.address() + 10 * MIB);
            assertThat(four.address()).isEqualTo(ten.address() + 12 * MIB);
            ten.release();
            two.release();
            four.release();
        }
    }

    @Test
    void everyAddressIs256ByteAlignedAndSmallRequestsUseSizeClasses() {
        try (DevicePool pool = new DevicePool(source, lazy256())) {
            List<DeviceBlock> blocks = new ArrayList<>();
            for (long bytes : new long[] {1, 255, 256, 257, 1000, 3000, 70_000, 1_900_000, 2 * MIB + 1}) {
                DeviceBlock block = pool.allocate(bytes, s0);
                assertThat(block.address() % 256).as("alignment of %d", bytes).isZero();
                assertThat(block.size()).isGreaterThanOrEqualTo(bytes);
                if (bytes > 2048 && bytes < 1_900_000) {
                    assertThat((double) (block.size() - bytes) / bytes).as("waste for %d", bytes).isLessThan(0.125);
                }
                blocks.add(block);
            }
            assertThat(blocks.get(4).size()).isEqualTo(1024);
            assertThat(blocks.get(8).size()).isEqualTo(4 * MIB);      // just above 2 MiB: two minimum blocks
            assertThat(pool.metrics().smallClasses()).isNotEmpty();
            blocks.forEach(DeviceBlock::release);
        }
    }

    @Test
    void requestsAboveTheMaximumBlockGetADedicatedChunkThatIsAccountedAndReused() {
        try (DevicePool pool = new DevicePool(source, lazy256())) {
            DeviceBlock big = pool.allocate(300 * MIB + 5, s0);
            assertThat(big.size()).isEqualTo(302 * MIB);
            assertThat(source.requests()).containsExactly(302 * MIB);
            assertThat(pool.metrics().reservedBytes()).isEqualTo(302 * MIB);
            assertThat(pool.metrics().allocatedBytes()).isEqualTo(302 * MIB);
            assertThat(pool.metrics().chunks()).singleElement().satisfies(c -> assertThat(c.dedicated()).isTrue());
            big.release();
            assertThat(pool.metrics().allocatedBytes()).isZero();
            assertThat(pool.metrics().chunks().getFirst().freeBytes()).as("kept for reuse").isEqualTo(302 * MIB);
            // at most 1/8 larger than the request: reused without asking the source
            DeviceBlock again = pool.allocate(280 * MIB, s1);
            assertThat(again.address()).isEqualTo(big.address());
            assertThat(again.size()).isEqualTo(302 * MIB);
            again.release();
            // too large for the cached chunk: the cached one goes back first, so reserved does not pile up
            DeviceBlock larger = pool.allocate(400 * MIB, s0);
            assertThat(source.requests()).containsExactly(302 * MIB, 400 * MIB);
            assertThat(pool.metrics().reservedBytes()).isEqualTo(400 * MIB);
            larger.release();
            assertThat(pool.trim()).isEqualTo(400 * MIB);
            assertThat(source.liveChunks()).isZero();
        }
    }

    @Test
    void aStreamPrefersFreeMemoryNoOtherStreamIsStillUsing() {
        try (DevicePool pool = new DevicePool(source, globalOnly())) {
            DeviceBlock a = pool.allocate(8 * MIB, s0);
            s0.pending = true;
            a.release();
            DeviceBlock b = pool.allocate(8 * MIB, s1);
            assertThat(b.address()).as("a's units are fenced by s0; the chunk has other free units")
                    .isNotEqualTo(a.address());
            assertThat(s0.fences.getLast().waiters).isEmpty();
            assertThat(pool.metrics().crossStreamWaits()).isZero();
            b.release();
        }
    }

    @Test
    void aStreamWaitsOnlyForTheStreamsThatFreedTheUnitsItTakes() {
        TestStream s2 = new TestStream(2);
        try (DevicePool pool = new DevicePool(source, globalOnly())) {
            DeviceBlock fromS0 = pool.allocate(8 * MIB, s0);
            DeviceBlock fromS2 = pool.allocate(8 * MIB, s2);
            List<DeviceBlock> fillers = fillChunk(pool, s1);
            s0.pending = true;
            s2.pending = true;
            fromS0.release();                                   // both freed into the same chunk
            fromS2.release();
            TestStream.TestFence s0Fence = s0.fences.getLast();
            TestStream.TestFence s2Fence = s2.fences.getLast();
            DeviceBlock taken = pool.allocate(8 * MIB, s1);
            assertThat(taken.address()).isIn(fromS0.address(), fromS2.address());
            TestStream.TestFence owner = taken.address() == fromS0.address() ? s0Fence : s2Fence;
            TestStream.TestFence other = owner == s0Fence ? s2Fence : s0Fence;
            assertThat(owner.waiters).containsExactly(s1);
            assertThat(other.waiters).as("not the fence of units s1 did not take").isEmpty();
            assertThat(pool.metrics().crossStreamWaits()).isEqualTo(1);
            taken.release();
            fillers.forEach(DeviceBlock::release);
            s0Fence.complete = true;
            s2Fence.complete = true;
        }
    }

    @Test
    void aReusedDedicatedChunkWaitsForItsPreviousStream() {
        try (DevicePool pool = new DevicePool(source, lazy256())) {
            DeviceBlock big = pool.allocate(512 * MIB, s0);
            s0.pending = true;
            big.release();
            TestStream.TestFence fence = s0.fences.getLast();
            DeviceBlock reused = pool.allocate(512 * MIB, s1);
            assertThat(reused.address()).isEqualTo(big.address());
            assertThat(fence.waiters).containsExactly(s1);
            assertThat(fence.closed).as("s1 is ordered after the fence: the chunk drops it").isTrue();
            s1.pending = true;
            reused.release();
            TestStream.TestFence late = s1.fences.getLast();
            pool.trim();
            assertThat(late.awaited).as("the chunk goes back only after s1's work on it").isTrue();
            assertThat(source.liveChunks()).isZero();
        }
    }

    @Test
    void lazyGrowthDoublesFrom256MiBTo1GiB() {
        try (DevicePool pool = new DevicePool(source, globalOnly())) {
            List<DeviceBlock> blocks = new ArrayList<>();
            for (int i = 0; i < 12; i++) {
                blocks.add(pool.allocate(256 * MIB, s0));
            }
            assertThat(source.requests()).containsExactly(256 * MIB, 512 * MIB, GIB, GIB, GIB);
            assertThat(pool.metrics().counters().grows()).isEqualTo(5);
            blocks.forEach(DeviceBlock::release);
        }
    }

    @Test
    void hybridReservesTheInitialSizeThenGrowsLazily() {
        PoolConfig config = globalOnly().withGrowth(GrowthPolicy.HYBRID, 300 * MIB);
        try (DevicePool pool = new DevicePool(source, config)) {
            assertThat(source.requests()).containsExactly(300 * MIB);
            DeviceBlock a = pool.allocate(256 * MIB, s0);
            DeviceBlock b = pool.allocate(32 * MIB, s0);       // 44 MiB left in the first chunk as 32 + 8 + 4
            assertThat(source.requests()).hasSize(1);
            DeviceBlock c = pool.allocate(64 * MIB, s0);
            assertThat(source.requests()).containsExactly(300 * MIB, 256 * MIB);
            a.release();
            b.release();
            c.release();
        }
    }

    @Test
    void eagerNeverGrowsAfterItsInitialReservation() {
        PoolConfig config = globalOnly().withGrowth(GrowthPolicy.EAGER, 512 * MIB);
        try (DevicePool pool = new DevicePool(source, config)) {
            DeviceBlock a = pool.allocate(256 * MIB, s0);
            DeviceBlock b = pool.allocate(256 * MIB, s0);
            assertThatThrownBy(() -> pool.allocate(2 * MIB, s0)).isInstanceOf(OutOfDeviceMemoryException.class)
                    .hasMessageContaining("tried to allocate 2.00 MiB");
            assertThat(source.requests()).containsExactly(512 * MIB);
            a.release();
            b.release();
        }
    }

    @Test
    void reserveGrowsToTheWarmUpSize() {
        try (DevicePool pool = new DevicePool(source, lazy256())) {
            assertThat(pool.reserve(100 * MIB)).isEqualTo(100 * MIB);
            assertThat(pool.reserve(90 * MIB)).isZero();
            assertThat(pool.metrics().reservedBytes()).isEqualTo(100 * MIB);
            DeviceBlock block = pool.allocate(64 * MIB, s0);
            assertThat(source.requests()).containsExactly(100 * MIB);
            block.release();
        }
    }

    @Test
    void blocksFreedToTheStreamCacheAreReusedWithoutTheGlobalLevel() {
        try (DevicePool pool = new DevicePool(source, lazy256())) {
            DeviceBlock first = pool.allocate(6 * MIB, s0);
            long address = first.address();
            first.release();
            assertThat(pool.metrics().cachedBytes()).isEqualTo(6 * MIB);
            DeviceBlock again = pool.allocate(5 * MIB + 1, s0);
            assertThat(again.address()).isEqualTo(address);
            AllocatorCounters counters = pool.metrics().counters();
            assertThat(counters.localHits()).isEqualTo(1);
            assertThat(counters.allocations()).isEqualTo(2);
            assertThat(pool.metrics().streams().getFirst().hitRatio()).isEqualTo(0.5);
            // another stream does not see stream 0's cache
            DeviceBlock other = pool.allocate(6 * MIB, s1);
            assertThat(other.address()).isNotEqualTo(address);
            again.release();
            other.release();
        }
    }

    @Test
    void localCacheRespectsItsCountCapAndOverflowsToTheGlobalLevel() {
        PoolConfig config = lazy256().apply(PoolTuning.builder().localCacheCountPerClass(4).build());
        try (DevicePool pool = new DevicePool(source, config)) {
            List<DeviceBlock> blocks = new ArrayList<>();
            for (int i = 0; i < 10; i++) {
                blocks.add(pool.allocate(2 * MIB, s0));
            }
            blocks.forEach(DeviceBlock::release);
            PoolMetrics metrics = pool.metrics();
            assertThat(metrics.streams().getFirst().cachedBlocks()).isLessThanOrEqualTo(4);
            assertThat(metrics.cachedBytes() + metrics.globalFreeBytes()).isEqualTo(metrics.reservedBytes());
            assertThat(metrics.allocatedBytes()).isZero();
        }
    }

    @Test
    void localCacheRespectsItsByteCapAndKeepsLargeBlocksOut() {
        PoolConfig config = lazy256().apply(PoolTuning.builder().localCacheBytesPerStream(16 * MIB).build());
        try (DevicePool pool = new DevicePool(source, config)) {
            pool.allocate(6 * MIB, s0).release();              // above a quarter of the cap: straight to global
            assertThat(pool.metrics().cachedBytes()).isZero();
            List<DeviceBlock> blocks = new ArrayList<>();
            for (int i = 0; i < 6; i++) {
                blocks.add(pool.allocate(4 * MIB, s0));
            }
            blocks.forEach(DeviceBlock::release);
            assertThat(pool.metrics().cachedBytes()).isEqualTo(16 * MIB);
            assertThat(pool.metrics().allocatedBytes()).isZero();
            PoolInvariants.freeSpaceIsWholeChunks(pool);
        }
    }

    /** Allocates 8 MiB blocks on {@code stream} until the global level has nothing free (without growing). */
    private static List<DeviceBlock> fillChunk(DevicePool pool, TestStream stream) {
        List<DeviceBlock> fillers = new ArrayList<>();
        while (pool.metrics().globalFreeBytes() > 0) {
            fillers.add(pool.allocate(8 * MIB, stream));
        }
        return fillers;
    }

    @Test
    void memoryMovingToAnotherStreamWaitsForTheFreeingStreamsFence() {
        TestStream s2 = new TestStream(2);
        try (DevicePool pool = new DevicePool(source, globalOnly())) {
            DeviceBlock a = pool.allocate(8 * MIB, s0);
            List<DeviceBlock> fillers = fillChunk(pool, s2);
            long reserved = pool.metrics().reservedBytes();
            s0.pending = true;                                  // stream 0's kernels still run
            a.release();
            TestStream.TestFence fence = s0.fences.getLast();
            DeviceBlock b = pool.allocate(8 * MIB, s1);         // a's units are the only free memory
            assertThat(b.address()).isEqualTo(a.address());
            assertThat(pool.metrics().reservedBytes()).isEqualTo(reserved);
            assertThat(fence.waiters).containsExactly(s1);
            s1.pending = true;
            b.release();
            // another free block whose stream has finished beats the one s1 still uses
            fillers.removeFirst().release();                    // s2 is done with it
            DeviceBlock c = pool.allocate(8 * MIB, s0);
            assertThat(c.address()).as("s1's block stays fenced").isNotEqualTo(a.address());
            c.release();
            fillers.forEach(DeviceBlock::release);
            // before the chunk goes back to the source, the host waits for the pending fences
            pool.trim();
            assertThat(s0.fences.getLast().awaited).isTrue();
            assertThat(s1.fences.getLast().awaited).isTrue();
            assertThat(source.liveChunks()).isZero();
        }
        assertThat(s0.fences).allSatisfy(f -> assertThat(f.closed).as("fence closed").isTrue());
        assertThat(s1.fences).allSatisfy(f -> assertThat(f.closed).as("fence closed").isTrue());
    }

    @Test
    void smallObjectsMovingToAnotherStreamWaitOnTheirSlabsFences() {
        try (DevicePool pool = new DevicePool(source, globalOnly())) {
            DeviceBlock keep = pool.allocate(3000, s0);
            DeviceBlock a = pool.allocate(3000, s0);
            s0.pending = true;
            a.release();
            TestStream.TestFence fence = s0.fences.getLast();
            DeviceBlock b = pool.allocate(3000, s1);
            assertThat(b.address()).isEqualTo(a.address());
            assertThat(fence.waiters).containsExactly(s1);
            s0.pending = false;
            keep.release();
            b.release();
        }
    }

    @Test
    void aNewSlabInheritsThePendingFencesOfItsChunk() {
        try (DevicePool pool = new DevicePool(source, globalOnly())) {
            DeviceBlock run = pool.allocate(2 * MIB, s0);
            s0.pending = true;
            run.release();                                      // 2 MiB of the chunk freed, stream 0 busy
            TestStream.TestFence fence = s0.fences.getLast();
            DeviceBlock object = pool.allocate(1000, s0);       // stream 0 carves a slab from that memory
            DeviceBlock other = pool.allocate(1000, s1);        // stream 1 takes an object of the same slab
            assertThat(other.address()).isEqualTo(object.address() + 1024);
            assertThat(fence.waiters).contains(s1);
            object.release();
            other.release();
        }
    }

    @Test
    void anotherStreamTakesAFinishedChunkBeforeOneWithPendingWork() {
        try (DevicePool pool = new DevicePool(source, globalOnly())) {
            List<DeviceBlock> full = new ArrayList<>();
            for (int i = 0; i < 32; i++) {
                full.add(pool.allocate(8 * MIB, s0));           // the first 256 MiB chunk is full
            }
            DeviceBlock first = full.getFirst();
            DeviceBlock early = pool.allocate(8 * MIB, s0);      // in a second chunk
            assertThat(source.liveChunks()).isEqualTo(2);
            early.release();                                    // stream 0 finished with it long ago
            s0.pending = true;
            first.release();                                    // stream 0 still works on this one
            TestStream.TestFence late = s0.fences.getLast();
            DeviceBlock b = pool.allocate(8 * MIB, s1);
            // both 8 MiB blocks are free and the lower one (first chunk) has stream 0's pending
            // fence; stream 1 gets the finished one and waits on nothing
            assertThat(b.address()).isEqualTo(early.address());
            assertThat(late.waiters).isEmpty();
            // (with only fenced memory free, stream 1 still takes it and waits: see
            // memoryMovingToAnotherStreamWaitsForTheFreeingStreamsFence)
            s0.pending = false;
            b.release();
            full.subList(1, full.size()).forEach(DeviceBlock::release);
        }
    }

    @Test
    void anotherStreamTakesSmallObjectsFromAFinishedSlabBeforeOneWithPendingWork() {
        try (DevicePool pool = new DevicePool(source, globalOnly())) {
            List<DeviceBlock> objects = new ArrayList<>();
            for (int i = 0; i < 2000; i++) {                     // 6 MB of 3000-byte objects: several slabs
                objects.add(pool.allocate(3000, s0));
            }
            DeviceBlock oldest = objects.getFirst();
            DeviceBlock newest = objects.getLast();
            newest.release();                                   // finished, in the newest slab
            s0.pending = true;
            oldest.release();                                   // pending, in the first slab (now most recent with room)
            TestStream.TestFence late = s0.fences.getLast();
            DeviceBlock b = pool.allocate(3000, s1);
            assertThat(b.address()).isNotEqualTo(oldest.address());
            assertThat(late.waiters).isEmpty();
            s0.pending = false;
            b.release();
            objects.subList(1, objects.size() - 1).forEach(DeviceBlock::release);
        }
    }

    @Test
    void completedFencesAreDroppedWithoutWaiting() {
        try (DevicePool pool = new DevicePool(source, globalOnly())) {
            DeviceBlock a = pool.allocate(8 * MIB, s0);
            a.release();                                        // fence complete at once
            DeviceBlock b = pool.allocate(8 * MIB, s1);
            assertThat(s0.fences.getLast().waiters).isEmpty();
            assertThat(s0.fences.getLast().closed).isTrue();
            b.release();
        }
    }

    @Test
    void cachedMemoryOfOtherStreamsIsReusedBeforeThePoolGrows() {
        PoolConfig config = lazy256().apply(PoolTuning.builder().localCacheBytesPerStream(GIB).build());
        try (DevicePool pool = new DevicePool(source, config)) {
            List<DeviceBlock> blocks = new ArrayList<>();
            for (int i = 0; i < 4; i++) {
                blocks.add(pool.allocate(64 * MIB, s0));
            }
            blocks.forEach(DeviceBlock::release);
            assertThat(pool.metrics().cachedBytes()).isEqualTo(256 * MIB);
            DeviceBlock big = pool.allocate(256 * MIB, s1);    // stream 0's cache is flushed and merged
            assertThat(source.requests()).containsExactly(256 * MIB);
            assertThat(pool.metrics().counters().recoveries()).isZero();
            assertThat(pool.metrics().cachedBytes()).isZero();
            big.release();
        }
    }

    @Test
    void outOfMemoryRecoveryFlushesLocalCachesAndRetries() {
        FakeChunkSource limited = new FakeChunkSource(256 * MIB);
        PoolConfig config = lazy256().apply(PoolTuning.builder().capFraction(1.0)
                .localCacheCountPerClass(2).build());
        try (DevicePool pool = new DevicePool(limited, config)) {
            List<DeviceBlock> blocks = new ArrayList<>();
            for (int i = 0; i < 4; i++) {
                blocks.add(pool.allocate(64 * MIB, s0));
            }
            blocks.forEach(DeviceBlock::release);             // two stay in stream 0's cache, two go global
            assertThat(pool.metrics().cachedBytes()).isEqualTo(128 * MIB);
            // 256 MiB needs stream 0's cached blocks; the cache holds less than that, so the pool first asks
            // the source, is refused, and recovers: flush caches, coalesce, retry
            DeviceBlock big = pool.allocate(256 * MIB, s1);
            assertThat(pool.metrics().counters().recoveries()).isEqualTo(1);
            assertThat(pool.metrics().cachedBytes()).isZero();
            assertThat(limited.requests()).as("the first chunk, then one refused").containsExactly(256 * MIB, 256 * MIB);
            big.release();
        }
    }

    @Test
    void outOfMemoryMessageStatesTheNumbers() {
        FakeChunkSource limited = new FakeChunkSource(GIB);
        PoolConfig config = lazy256().apply(PoolTuning.builder().capBytes(512 * MIB).build());
        try (DevicePool pool = new DevicePool(limited, config)) {
            DeviceBlock a = pool.allocate(200 * MIB, s0);
            DeviceBlock b = pool.allocate(30 * MIB, s0);
            assertThatThrownBy(() -> pool.allocate(400 * MIB, s1))
                    .isInstanceOf(OutOfDeviceMemoryException.class)
                    .hasMessageContaining("tried to allocate 400.00 MiB")
                    .hasMessageContaining("Reserved 256.00 MiB of a cap of 512.00 MiB")
                    .hasMessageContaining("allocated 230.00 MiB")
                    .hasMessageContaining("cached in local caches 0 B")
                    .hasMessageContaining("largest free block 16.00 MiB")
                    .hasMessageContaining("fragmentation 0.38")
                    .satisfies(e -> assertThat(((OutOfDeviceMemoryException) e).requestedBytes())
                            .isEqualTo(400 * MIB));
            assertThat(pool.metrics().counters().failures()).isEqualTo(1);
            a.release();
            b.release();
        }
    }

    @Test
    void sourceRefusalFallsBackToAChunkOfExactlyTheRequest() {
        FakeChunkSource limited = new FakeChunkSource(GIB);
        limited.limit = 100 * MIB;
        try (DevicePool pool = new DevicePool(limited, lazy256())) {
            DeviceBlock block = pool.allocate(64 * MIB, s0);
            assertThat(limited.requests()).containsExactly(256 * MIB, 64 * MIB);
            block.release();
        }
    }

    @Test
    void aRefusedStepFallsBackToOneBlockOfTheRequestsOrder() {
        FakeChunkSource limited = new FakeChunkSource(GIB);
        limited.limit = 16 * MIB;
        try (DevicePool pool = new DevicePool(limited, lazy256())) {
            DeviceBlock block = pool.allocate(10 * MIB, s0);    // 5 blocks need an aligned 8-block (16 MiB) root
            assertThat(block.size()).isEqualTo(10 * MIB);
            assertThat(limited.requests()).containsExactly(256 * MIB, 16 * MIB);
            DeviceBlock four = pool.allocate(4 * MIB, s0);      // the trimmed tail (2 + 4 MiB) still serves
            DeviceBlock two = pool.allocate(2 * MIB, s0);
            assertThat(limited.requests()).hasSize(2);
            block.release();
            four.release();
            two.release();
        }
    }

    @Test
    void doubleReleaseFailsWithAClearMessage() {
        try (DevicePool pool = new DevicePool(source, lazy256())) {
            DeviceBlock block = pool.allocate(4096, s0);
            block.retain();
            assertThat(block.release()).isFalse();
            assertThat(block.release()).isTrue();
            assertThatThrownBy(block::release).isInstanceOf(IllegalStateException.class)
                    .hasMessageContaining("double release").hasMessageContaining("size=4096");
        }
    }

    @Test
    void closeReportsOutstandingBlocksWithTheirAllocationSite() {
        DevicePool pool = new DevicePool(source, lazy256().withTrackAllocationSites(true));
        TestStream s3 = new TestStream(3);
        pool.allocate(3 * MIB, s3);
        pool.allocate(1000, s0).release();
        assertThatThrownBy(pool::close).isInstanceOf(IllegalStateException.class)
                .hasMessageContaining("1 block(s) outstanding")
                .hasMessageContaining("4194304 B (4.00 MiB, requested 3145728 B) on stream 3")
                .hasMessageContaining("closeReportsOutstandingBlocksWithTheirAllocationSite");
        assertThat(source.liveChunks()).as("memory still goes back").isZero();
    }

    @Test
    void closeWithoutTrackingStillCountsOutstandingBlocks() {
        DevicePool pool = new DevicePool(source, lazy256());
        DeviceBlock run = pool.allocate(3 * MIB, s0);
        DeviceBlock object = pool.allocate(3000, s0);
        DeviceBlock big = pool.allocate(300 * MIB, s0);
        pool.allocate(5000, s0).release();
        assertThatThrownBy(pool::close).hasMessageContaining("3 block(s) outstanding")
                .hasMessageContaining("trackAllocationSites")
                .hasMessageContaining("4194304 B (4.00 MiB) at 0x" + Long.toHexString(run.address()))
                .hasMessageContaining("3072 B (3.00 KiB) at 0x" + Long.toHexString(object.address()))
                .hasMessageContaining("314572800 B (300.00 MiB) at 0x" + Long.toHexString(big.address()));
        assertThatThrownBy(() -> pool.allocate(1, s0)).hasMessageContaining("closed");
    }

    @Test
    void emptyChunksGoBackAfterTheIdleAgeAboveTheThreshold() {
        PoolConfig config = globalOnly().apply(PoolTuning.builder().releaseIdleAge(Duration.ZERO)
                .releaseThresholdBytes(256 * MIB).build());
        try (DevicePool pool = new DevicePool(source, config)) {
            List<DeviceBlock> blocks = new ArrayList<>();
            for (int i = 0; i < 3; i++) {
                blocks.add(pool.allocate(256 * MIB, s0));        // chunks of 256 and 512 MiB
            }
            blocks.forEach(DeviceBlock::release);
            long released = pool.maintain();
            // one chunk goes, the other keeps reserved at the threshold
            assertThat(released).isIn(256 * MIB, 512 * MIB);
            assertThat(pool.metrics().reservedBytes()).isGreaterThanOrEqualTo(256 * MIB);
            assertThat(source.liveChunks()).isEqualTo(1);
            pool.tune(PoolTuning.builder().releaseThresholdBytes(0).build());
            pool.maintain();
            assertThat(source.liveChunks()).isZero();
        }
    }

    @Test
    void idleChunksStayUntilTheirAgeIsReached() {
        PoolConfig config = globalOnly().apply(PoolTuning.builder().releaseIdleAge(Duration.ofHours(1)).build());
        try (DevicePool pool = new DevicePool(source, config)) {
            pool.allocate(8 * MIB, s0).release();
            assertThat(pool.maintain()).isZero();
            assertThat(pool.trim()).as("trim ignores the age").isEqualTo(256 * MIB);
        }
    }

    @Test
    void idleLocalClassesAreFlushedByMaintenance() {
        PoolConfig config = lazy256().apply(PoolTuning.builder().localIdleAge(Duration.ZERO).build());
        try (DevicePool pool = new DevicePool(source, config)) {
            pool.allocate(8 * MIB, s0).release();
            pool.allocate(1024, s0).release();
            assertThat(pool.metrics().cachedBytes()).isPositive();
            pool.maintain();
            assertThat(pool.metrics().cachedBytes()).isZero();
        }
    }

    @Test
    void detachingAStreamFlushesItsCacheAndKeepsTheCounters() {
        try (DevicePool pool = new DevicePool(source, lazy256())) {
            pool.allocate(8 * MIB, s0).release();
            pool.allocate(8 * MIB, s0).release();
            pool.detachStream(s0);
            assertThat(pool.metrics().cachedBytes()).isZero();
            assertThat(pool.metrics().streams()).isEmpty();
            assertThat(pool.metrics().counters().allocations()).isEqualTo(2);
            assertThat(pool.metrics().counters().localHits()).isEqualTo(1);
            assertThat(pool.metrics().counters().frees()).isEqualTo(2);
        }
    }

    @Test
    void tuningIsValidatedAsAWholeAndRejectedTuningChangesNothing() {
        try (DevicePool pool = new DevicePool(source, lazy256())) {
            assertThatThrownBy(() -> pool.tune(PoolTuning.builder().coalesceThreshold(5).localCacheCountPerClass(65).build()))
                    .isInstanceOf(IllegalArgumentException.class)
                    .hasMessageContaining("localCacheCountPerClass = 65").hasMessageContaining("[0, 64]");
            assertThat(pool.config().coalesceThreshold()).isEqualTo(10);
            assertThatThrownBy(() -> pool.tune(PoolTuning.builder().growthStepBytes(3 * MIB).build()))
                    .hasMessageContaining("growthStepBytes = 3145728");
            assertThatThrownBy(() -> pool.tune(PoolTuning.builder().capFraction(1.5).build()))
                    .hasMessageContaining("capFraction = 1.5").hasMessageContaining("(0, 1]");
            PoolConfig tuned = pool.tune(PoolTuning.builder().coalesceThreshold(3).growthStepBytes(512 * MIB).build());
            assertThat(tuned.coalesceThreshold()).isEqualTo(3);
            assertThat(pool.config()).isEqualTo(tuned);
            pool.allocate(8 * MIB, s0).release();
            assertThat(source.requests()).containsExactly(512 * MIB);
        }
    }

    @Test
    void metricsReportFragmentationAndPeaks() {
        try (DevicePool pool = new DevicePool(source, globalOnly())) {
            DeviceBlock a = pool.allocate(128 * MIB, s0);
            DeviceBlock b = pool.allocate(64 * MIB, s0);
            PoolMetrics metrics = pool.metrics();
            assertThat(metrics.globalFreeBytes()).isEqualTo(64 * MIB);
            assertThat(metrics.largestFreeBlockBytes()).isEqualTo(64 * MIB);
            assertThat(metrics.fragmentation()).isZero();
            assertThat(metrics.peakAllocatedBytes()).isEqualTo(192 * MIB);
            a.release();
            assertThat(metrics.allocatedBytes()).isEqualTo(64 * MIB);
            assertThat(metrics.peakAllocatedBytes()).isEqualTo(192 * MIB);
            metrics.resetPeaks();
            assertThat(metrics.peakAllocatedBytes()).isEqualTo(64 * MIB);
            assertThat(metrics.peakReservedBytes()).isEqualTo(256 * MIB);
            assertThat(metrics.freeBlocks().get(6).freeBlocks()).as("128 MiB blocks").isEqualTo(1);
            assertThat(metrics.allocationLatency().count()).isLessThanOrEqualTo(2);
            b.release();
            assertThat(metrics.counters().coalesces()).isZero();
            pool.trim();
            assertThat(metrics.counters().coalesces()).isEqualTo(2);   // 64 + 64 merged, then 128 + 128
        }
    }

    @Test
    void configurationErrorsNameFieldValueAndRange() {
        PoolConfig d = PoolConfig.defaults();
        assertThatThrownBy(() -> d.withBlocks(3 * MIB, 256 * MIB)).hasMessage(
                "gpupool.memory.minBlockBytes = 3145728 is invalid; allowed: a power of two in [2097152, 67108864]");
        assertThatThrownBy(() -> d.withGrowth(GrowthPolicy.LAZY, 5)).hasMessageContaining("initialBytes = 5")
                .hasMessageContaining("HYBRID");
        assertThatThrownBy(() -> d.withGrowth(GrowthPolicy.EAGER, 0)).hasMessageContaining("initialBytes = 0");
        assertThatThrownBy(() -> d.withMode(AllocatorMode.BEST_FIT)).hasMessageContaining("mode = BEST_FIT");
        assertThatThrownBy(() -> d.apply(PoolTuning.builder().localIdleAge(Duration.ofSeconds(-1)).build()))
                .hasMessageContaining("localIdleAge = PT-1S");
        assertThat(d.effectiveCapBytes(1001 * MIB)).as("0.9 x 1001 MiB, down to whole blocks").isEqualTo(900 * MIB);
        assertThat(d.apply(PoolTuning.builder().capBytes(GIB).build()).effectiveCapBytes(1001 * MIB)).isEqualTo(GIB);
    }

    @Test
    void badArgumentsAreRejected() {
        try (DevicePool pool = new DevicePool(source, lazy256())) {
            assertThatThrownBy(() -> pool.allocate(0, s0)).hasMessageContaining("bytes = 0");
            assertThatThrownBy(() -> pool.allocate(-5, s0)).hasMessageContaining("bytes = -5");
            assertThatThrownBy(() -> pool.allocate(5, new TestStream(-1))).hasMessageContaining("ordinal = -1");
            assertThatThrownBy(() -> pool.reserve(-1)).hasMessageContaining("bytes = -1");
        }
    }
}
