package io.gpupool.memory.pool;

import io.gpupool.memory.DeviceBlock;
import io.gpupool.memory.OutOfDeviceMemoryException;
import io.gpupool.memory.PoolConfig;
import io.gpupool.memory.PoolTuning;
import io.gpupool.memory.metric.AllocatorMode;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;

import static io.gpupool.memory.PoolConfig.GIB;
import static io.gpupool.memory.PoolConfig.KIB;
import static io.gpupool.memory.PoolConfig.MIB;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * A pool at its cap with no room for another 2 MiB slab: a small request whose class has no free
 * object is served from a larger class's slab that has room, instead of failing.
 */
class SmallObjectsUnderCapTest {

    private final FakeChunkSource source = new FakeChunkSource(GIB, true);
    private final TestStream s0 = new TestStream(0);
    private final TestStream s1 = new TestStream(1);

    private static PoolConfig cappedAt(long cap, AllocatorMode mode) {
        return GranuleExtents.defaults().withMode(mode).apply(PoolTuning.builder().capBytes(cap).build());
    }

    @Test
    void aFullCapServesASmallClassFromALargerClassWithRoom() {
        for (AllocatorMode mode : AllocatorMode.values()) {
            if (mode != AllocatorMode.TWO_LEVEL && mode != AllocatorMode.GLOBAL_ONLY) {
                continue;
            }
            try (DevicePool pool = new DevicePool(source, cappedAt(8 * MIB, mode))) {
                DeviceBlock large = pool.allocate(256 * KIB, s0);  // a 2 MiB slab of 256 KiB objects, 7 free
                DeviceBlock run = pool.allocate(6 * MIB, s1);      // the rest of the cap
                assertThat(pool.metrics().reservedBytes()).isEqualTo(8 * MIB);
                DeviceBlock small = pool.allocate(200 * KIB, s1);  // its own class has no slab, none fits under the cap
                assertThat(small.size()).as(mode + ": an object of the 256 KiB class").isEqualTo(256 * KIB);
                assertThat(small.requestedBytes()).isEqualTo(200 * KIB);
                assertThat(small.address()).as("inside the existing slab")
                        .isBetween(large.address() - 2 * MIB + 256 * KIB, large.address() + 2 * MIB - 256 * KIB);
                assertThat(pool.metrics().reservedBytes()).isEqualTo(8 * MIB);
                assertThat(pool.metrics().counters().failures()).as("the request was served").isZero();
                PoolInvariants.liveBlocksAreSound(List.of(large, run, small), source);
                PoolInvariants.accountingHolds(pool, List.of(large, run, small), source);
                small.release();
                DeviceBlock again = pool.allocate(256 * KIB, s0);  // the borrowed object went back to its class
                assertThat(again.size()).isEqualTo(256 * KIB);
                PoolInvariants.accountingHolds(pool, List.of(large, run, again), source);
                again.release();
                run.release();
                large.release();
                PoolInvariants.accountingHolds(pool, List.of(), source);
                PoolInvariants.freeSpaceIsWholeChunks(pool);
            }
        }
    }

    @Test
    void manyRarelyUsedClassesFitTheCapTogether() {
        // eight distinct classes at once need eight slabs (16 MiB) under a cap of 8 MiB; the live bytes are 1.2 MiB
        try (DevicePool pool = new DevicePool(source, cappedAt(8 * MIB, AllocatorMode.TWO_LEVEL))) {
            List<DeviceBlock> blocks = new ArrayList<>();
            long requested = 0;
            for (int i = 0; i < 8; i++) {
                long bytes = 300 * KIB - i * 24 * KIB;               // largest first: each later one has a larger class
                blocks.add(pool.allocate(bytes, i % 2 == 0 ? s0 : s1));
                requested += bytes;
            }
            assertThat(requested).isLessThan(2 * MIB);
            assertThat(pool.metrics().reservedBytes()).isLessThanOrEqualTo(8 * MIB);
            assertThat(pool.metrics().counters().failures()).isZero();
            PoolInvariants.liveBlocksAreSound(blocks, source);
            PoolInvariants.accountingHolds(pool, blocks, source);
            blocks.forEach(DeviceBlock::release);
            PoolInvariants.accountingHolds(pool, List.of(), source);
        }
    }

    @Test
    void aClassAboveEveryClassWithRoomStillFailsClearly() {
        try (DevicePool pool = new DevicePool(source, cappedAt(8 * MIB, AllocatorMode.GLOBAL_ONLY))) {
            DeviceBlock small = pool.allocate(64 * KIB, s0);
            DeviceBlock run = pool.allocate(6 * MIB, s1);
            assertThatThrownBy(() -> pool.allocate(512 * KIB, s1))  // no larger class has a slab
                    .isInstanceOf(OutOfDeviceMemoryException.class);
            run.release();
            small.release();
        }
    }
}
