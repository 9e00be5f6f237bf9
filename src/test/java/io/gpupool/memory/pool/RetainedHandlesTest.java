package io.gpupool.memory.pool;

import io.gpupool.memory.DeviceBlock;
import io.gpupool.memory.OutOfDeviceMemoryException;
import io.gpupool.memory.PoolConfig;
import io.gpupool.memory.PoolTuning;
import io.gpupool.memory.metric.AllocatorMode;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;

import static io.gpupool.memory.PoolConfig.GIB;
import static io.gpupool.memory.PoolConfig.MIB;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * MAPPED growth with {@link PoolConfig#retainedHandleBytes()}: memory unmapped when the pool shrinks
 * is kept and mapped again when it grows, within the bound and the cap; kept memory goes on trim,
 * recovery, a lower cap and close; no source call is made under a lock that an allocation from
 * mapped memory needs. The grow/shrink round is an allocation burst, its release, and maintenance
 * (with releaseIdleAge 0 the mapped budget follows the demand back down at once).
 */
// a lock held across a blocked map would hang the concurrency tests (a monitor wait ignores interrupts)
@Timeout(value = 60, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
class RetainedHandlesTest {

    private static final long BOUND = 256 * MIB;

    private final FakeChunkSource source = new FakeChunkSource(8 * GIB, true);
    private final TestStream s0 = new TestStream(0);
    private final TestStream s1 = new TestStream(1);

    private static PoolConfig retaining(long bound) {
        return GranuleExtents.defaults().withMode(AllocatorMode.GLOBAL_ONLY)
                .apply(PoolTuning.builder().releaseIdleAge(Duration.ZERO).build())
                .withRetainedHandleBytes(bound);
    }

    /** Slack 1: the blocked map is not preceded by a reclaim, which would unmap the free mapped block. */
    private static PoolConfig unreclaimed(long bound) {
        return retaining(bound).apply(PoolTuning.builder().mappedSlack(1.0).build());
    }

    /** One grow/shrink round: {@code count} blocks of {@code bytes}, released, then maintenance. */
    private void round(DevicePool pool, TestStream stream, int count, long bytes) {
        List<DeviceBlock> live = new ArrayList<>();
        for (int i = 0; i < count; i++) {
            live.add(pool.allocate(bytes, stream));
            assertDeviceMemoryIsReserved(pool);
        }
        live.forEach(DeviceBlock::release);
        pool.maintain();
        assertDeviceMemoryIsReserved(pool);
    }

    /** Every byte the device holds for the pool, kept or mapped, is reserved: nothing leaked, nothing hidden from the cap. */
    private void assertDeviceMemoryIsReserved(DevicePool pool) {
        assertThat(source.liveBytes()).as("device memory = reserved").isEqualTo(pool.metrics().reservedBytes());
        assertThat(pool.metrics().retainedHandleBytes()).as("kept within the bound")
                .isLessThanOrEqualTo(pool.config().retainedHandleBytes());
    }

    @Test
    void afterWarmUpShrinkingAndGrowingMakeNoCreateAndNoRelease() {
        try (DevicePool pool = new DevicePool(source, retaining(BOUND))) {
            round(pool, s0, 10, 8 * MIB);
            assertThat(pool.metrics().retainedHandleBytes()).as("maintenance unmapped and kept").isEqualTo(64 * MIB);
            assertThat(pool.metrics().reservedBytes()).as("16 MiB mapped (the slack floor) + 64 MiB kept")
                    .isEqualTo(80 * MIB);
            int creates = source.creates.get();
            int releases = source.releases.get();
            long maps = pool.metrics().mapCalls();
            long unmaps = pool.metrics().unmapCalls();
            for (int i = 0; i < 20; i++) {
                round(pool, i % 2 == 0 ? s0 : s1, 10, 8 * MIB);
            }
            assertThat(pool.metrics().mapCalls()).as("the pool kept growing").isGreaterThanOrEqualTo(maps + 20);
            assertThat(pool.metrics().unmapCalls()).as("and shrinking").isGreaterThanOrEqualTo(unmaps + 20);
            assertThat(source.creates.get()).as("no create in the steady state").isEqualTo(creates);
            assertThat(source.releases.get()).as("no release in the steady state").isEqualTo(releases);
            assertThat(pool.metrics().physicalCreates()).isEqualTo(creates);
            assertThat(pool.metrics().physicalReleases()).isEqualTo(releases);
        }
    }

    @Test
    void withoutTheBoundEveryUnmapReleasesAndEveryMapCreates() {
        try (DevicePool pool = new DevicePool(source, retaining(0))) {
            round(pool, s0, 10, 8 * MIB);
            long creates = pool.metrics().physicalCreates();
            round(pool, s0, 10, 8 * MIB);
            assertThat(pool.metrics().retainedHandleBytes()).isZero();
            assertThat(pool.metrics().reservedBytes()).as("the slack floor stays mapped").isEqualTo(16 * MIB);
            assertThat(pool.metrics().physicalCreates()).as("64 MiB mapped anew in 2 MiB granules")
                    .isEqualTo(creates + 32);
            assertThat(source.physicalHandles()).as("plain map and unmap calls, no handles apart").isZero();
        }
    }

    @Test
    void keptMemoryStaysWithinTheBoundCountsTowardTheCapAndGoesWhenTheCapIsLowered() {
        PoolConfig config = retaining(32 * MIB).apply(PoolTuning.builder().capBytes(128 * MIB).build());
        try (DevicePool pool = new DevicePool(source, config)) {
            round(pool, s0, 12, 8 * MIB);
            assertThat(pool.metrics().retainedHandleBytes()).as("80 MiB unmapped, the bound kept").isEqualTo(32 * MIB);
            assertThat(pool.metrics().reservedBytes()).isEqualTo(16 * MIB + 32 * MIB);
            List<DeviceBlock> live = new ArrayList<>();
            for (int i = 0; i < 16; i++) {                          // the whole cap: kept memory first, then new
                live.add(pool.allocate(8 * MIB, s0));
                assertDeviceMemoryIsReserved(pool);
            }
            assertThat(pool.metrics().reservedBytes()).isEqualTo(128 * MIB);
            assertThatThrownBy(() -> pool.allocate(8 * MIB, s0)).as("kept memory is no way around the cap")
                    .isInstanceOf(OutOfDeviceMemoryException.class);
            live.forEach(DeviceBlock::release);
            pool.maintain();
            assertThat(pool.metrics().retainedHandleBytes()).isEqualTo(32 * MIB);
            pool.tune(PoolTuning.builder().capBytes(32 * MIB).build());
            assertThat(pool.metrics().reservedBytes()).as("kept memory above the lower cap went")
                    .isLessThanOrEqualTo(32 * MIB);
            assertThat(pool.metrics().retainedHandleBytes()).isEqualTo(16 * MIB);
            assertDeviceMemoryIsReserved(pool);
        }
    }

    @Test
    void trimAndCloseReleaseEveryKeptHandle() {
        DevicePool pool = new DevicePool(source, retaining(BOUND));
        round(pool, s0, 10, 8 * MIB);
        round(pool, s1, 4, 100 * MIB);                             // large runs: whole extents kept too
        long kept = pool.metrics().retainedHandleBytes();
        assertThat(kept).isGreaterThan(64 * MIB);
        assertThat(pool.trim()).as("trim returns the kept memory too").isGreaterThanOrEqualTo(kept);
        assertThat(pool.metrics().retainedHandles()).isZero();
        assertThat(pool.metrics().reservedBytes()).isZero();
        assertThat(source.physicalHandles()).as("drained to 0 handles").isZero();
        assertThat(source.liveBytes()).isZero();

        round(pool, s0, 10, 8 * MIB);
        assertThat(pool.metrics().retainedHandles()).isPositive();
        pool.close();
        assertThat(source.physicalHandles()).as("close drains them as well").isZero();
        assertThat(source.liveBytes()).isZero();
        assertThat(source.addressRanges()).isZero();
    }

    @Test
    void aFailedMapOfKeptHandlesLeavesNoHandleBehind() {
        try (DevicePool pool = new DevicePool(source, retaining(BOUND))) {
            round(pool, s0, 10, 8 * MIB);
            assertThat(pool.metrics().retainedHandles()).isPositive();

            source.failMaps.set(1);                                 // the map fails, the retry after recovery works
            DeviceBlock block = pool.allocate(32 * MIB, s0);
            assertThat(source.contains(block.address(), block.size())).isTrue();
            assertThat(pool.metrics().counters().recoveries()).isPositive();
            assertDeviceMemoryIsReserved(pool);
            block.release();

            round(pool, s0, 10, 8 * MIB);
            assertThat(pool.metrics().retainedHandles()).isPositive();
            source.failMaps.set(2);                                 // and the retry fails too
            assertThatThrownBy(() -> pool.allocate(32 * MIB, s0)).isInstanceOf(OutOfDeviceMemoryException.class);
            assertDeviceMemoryIsReserved(pool);
            assertThat(source.physicalHandles() * 2 * MIB).as("each live handle is mapped or kept")
                    .isEqualTo(source.liveBytes());
            pool.trim();
            assertThat(source.physicalHandles()).isZero();
            assertThat(source.liveBytes()).isZero();
        }
    }

    /**
     * A thread inside the source's map holds nothing another allocation needs: a run served from
     * mapped memory (here in a small chunk while the blocked map is in a large one) is handed out.
     */
    @ParameterizedTest(name = "retained bound {0}")
    @ValueSource(longs = {0, BOUND})
    void aBlockedMapDoesNotStopAllocationsFromMappedMemory(long bound) throws Exception {
        ExecutorService mapper = Executors.newSingleThreadExecutor();
        try (DevicePool pool = new DevicePool(source, unreclaimed(bound))) {
            DeviceBlock warm = pool.allocate(8 * MIB, s1);
            long mappedAt = warm.address();
            warm.release();                                         // mapped, free in the global level
            CountDownLatch release = new CountDownLatch(1);
            source.blockMaps = release;
            Future<DeviceBlock> blocked = mapper.submit(() -> pool.allocate(128 * MIB, s0));
            source.mapEntered.await();

            DeviceBlock served = pool.allocate(8 * MIB, s1);
            assertThat(served.address()).as("the mapped block").isEqualTo(mappedAt);
            assertThat(blocked.isDone()).as("the other thread is still inside map").isFalse();

            source.blockMaps = null;
            release.countDown();
            blocked.get().release();
            served.release();
        } finally {
            mapper.shutdownNow();
        }
    }

    /**
     * Two runs of one large chunk: while a thread maps the extents of its run, another run of the
     * same chunk whose extents are mapped is handed out without waiting for that map.
     */
    @ParameterizedTest(name = "retained bound {0}")
    @ValueSource(longs = {0, BOUND})
    void aBlockedMapInALargeChunkDoesNotStopItsMappedRuns(long bound) throws Exception {
        ExecutorService mapper = Executors.newSingleThreadExecutor();
        try (DevicePool pool = new DevicePool(source, unreclaimed(bound))) {
            DeviceBlock warm = pool.allocate(64 * MIB, s1);
            DeviceBlock neighbour = pool.allocate(64 * MIB, s1);    // keeps warm's block from merging
            long mappedAt = warm.address();
            warm.release();
            CountDownLatch release = new CountDownLatch(1);
            source.blockMaps = release;
            Future<DeviceBlock> blocked = mapper.submit(() -> pool.allocate(128 * MIB, s0));
            source.mapEntered.await();

            DeviceBlock served = pool.allocate(64 * MIB, s1);
            assertThat(served.address()).as("the mapped run of the same chunk").isEqualTo(mappedAt);
            assertThat(blocked.isDone()).as("the other thread is still inside map").isFalse();

            source.blockMaps = null;
            release.countDown();
            DeviceBlock mapped = blocked.get();
            assertThat(source.contains(mapped.address(), mapped.size())).isTrue();
            mapped.release();
            served.release();
            neighbour.release();
        } finally {
            mapper.shutdownNow();
        }
    }
}
