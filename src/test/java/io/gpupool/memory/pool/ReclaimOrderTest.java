package io.gpupool.memory.pool;

import io.gpupool.memory.DeviceBlock;
import io.gpupool.memory.PoolConfig;
import io.gpupool.memory.PoolTuning;
import io.gpupool.memory.ReclaimOrder;
import io.gpupool.memory.metric.AllocatorMode;
import org.junit.jupiter.api.Test;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.List;
import java.util.Random;

import static io.gpupool.memory.PoolConfig.GIB;
import static io.gpupool.memory.PoolConfig.MIB;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/** Which free mapped blocks a reclaim for the budget unmaps: {@link ReclaimOrder}, {@link ReclaimChoice}, {@link FreeStamps}. */
class ReclaimOrderTest {

    private final FakeChunkSource source = new FakeChunkSource(8 * GIB, true);
    private final TestStream stream = new TestStream(0);

    /**
     * Twelve 8 MiB blocks, every other one freed in ascending address order (the last freed lies
     * highest); a maintenance reclaim down to the budget (6 live blocks + the 16 MiB floor) unmaps
     * four of the six free ones. Returns which of the six free blocks stayed mapped.
     */
    private boolean[] mappedAfterReclaim(PoolConfig config) {
        try (DevicePool pool = new DevicePool(source, config)) {
            List<DeviceBlock> blocks = new ArrayList<>();
            for (int i = 0; i < 12; i++) {
                blocks.add(pool.allocate(8 * MIB, stream));
            }
            for (int i = 1; i < 12; i++) {
                assertThat(blocks.get(i).address()).as("address-ordered placement").isGreaterThan(blocks.get(i - 1).address());
            }
            for (int i = 0; i < 12; i += 2) {
                blocks.get(i).release();                            // free buddies stay apart: no merge
            }
            assertThat(pool.metrics().reservedBytes()).isEqualTo(96 * MIB);
            pool.maintain();
            assertThat(pool.metrics().reservedBytes()).as("48 MiB live + the 16 MiB floor").isEqualTo(64 * MIB);
            boolean[] mapped = new boolean[6];
            for (int i = 0; i < 6; i++) {
                mapped[i] = source.mapped(blocks.get(2 * i).address(), 8 * MIB);
            }
            for (int i = 1; i < 12; i += 2) {
                blocks.get(i).release();
            }
            return mapped;
        }
    }

    private static PoolConfig config(ReclaimOrder order) {
        return PoolConfig.defaults().withMode(AllocatorMode.GLOBAL_ONLY)
                .apply(PoolTuning.builder().releaseIdleAge(Duration.ZERO).mappedSlack(0.0).reclaimOrder(order).build());
    }

    @Test
    void coldestInOrderKeepsTheMostRecentlyFreedBlocksMapped() {
        assertThat(mappedAfterReclaim(config(ReclaimOrder.COLDEST_IN_ORDER)))
                .as("the two freed last stay mapped, the four freed first are unmapped")
                .containsExactly(false, false, false, false, true, true);
    }

    @Test
    void highestAddressUnmapsTheHighestBlocksWhateverTheirAge() {
        assertThat(PoolConfig.defaults().reclaimOrder()).isEqualTo(ReclaimOrder.HIGHEST_ADDRESS);
        assertThat(mappedAfterReclaim(config(ReclaimOrder.HIGHEST_ADDRESS)))
                .as("the default: the two lowest stay mapped, the most recently freed go")
                .containsExactly(true, true, false, false, false, false);
    }

    /**
     * A large request's 64 MiB run (a large chunk) and four 8 MiB blocks of small chunks lie free beside nine
     * live 8 MiB blocks; with a slack of 1 the budget is twice the live bytes (144 MiB), 24 MiB under the
     * reserved 168: answers whether the large run and each small free block stayed mapped after the reclaim.
     */
    private boolean[] mappedAfterReclaimBesideALargeRun(ReclaimOrder order) {
        PoolConfig config = PoolConfig.defaults().withMode(AllocatorMode.GLOBAL_ONLY)
                .apply(PoolTuning.builder().releaseIdleAge(Duration.ZERO).mappedSlack(1.0).reclaimOrder(order).build());
        try (DevicePool pool = new DevicePool(source, config)) {
            DeviceBlock large = pool.allocate(64 * MIB, stream);
            List<DeviceBlock> small = new ArrayList<>();
            for (int i = 0; i < 13; i++) {
                small.add(pool.allocate(8 * MIB, stream));
            }
            large.release();
            for (int i = 0; i < 8; i += 2) {
                small.get(i).release();                             // free buddies stay apart: no merge
            }
            assertThat(pool.metrics().reservedBytes()).isEqualTo(168 * MIB);
            pool.maintain();
            assertThat(pool.metrics().reservedBytes()).as("at most the budget").isLessThanOrEqualTo(144 * MIB);
            boolean[] mapped = new boolean[5];
            mapped[0] = source.mapped(large.address(), 64 * MIB);
            for (int i = 0; i < 4; i++) {
                mapped[i + 1] = source.mapped(small.get(2 * i).address(), 8 * MIB);
            }
            for (int i = 1; i < 13; i += 2) {
                small.get(i).release();
            }
            small.get(8).release();
            small.get(10).release();
            small.get(12).release();
            return mapped;
        }
    }

    @Test
    void smallChunksFirstKeepsALargeRequestsFreeRunMappedWhileSmallFreeBlocksCoverTheExcess() {
        boolean[] mapped = mappedAfterReclaimBesideALargeRun(ReclaimOrder.SMALL_CHUNKS_FIRST);
        assertThat(mapped[0]).as("the large run stays mapped").isTrue();
        assertThat(count(mapped, 1, false)).as("three 8 MiB small blocks cover the 24 MiB").isEqualTo(3);
    }

    @Test
    void theOtherOrdersUnmapTheLargeRunFirst() {
        for (ReclaimOrder order : List.of(ReclaimOrder.HIGHEST_ADDRESS, ReclaimOrder.COLDEST_IN_ORDER)) {
            boolean[] mapped = mappedAfterReclaimBesideALargeRun(order);
            assertThat(mapped[0]).as(order + ": the largest block goes first").isFalse();
            assertThat(count(mapped, 1, false)).as(order + ": no small block needed").isZero();
        }
    }

    private static int count(boolean[] values, int from, boolean value) {
        int n = 0;
        for (int i = from; i < values.length; i++) {
            n += values[i] == value ? 1 : 0;
        }
        return n;
    }

    @Test
    void theOrderAndTheHysteresisAreTunedAtRuntimeAndValidated() {
        try (DevicePool pool = new DevicePool(source, PoolConfig.defaults())) {
            PoolConfig tuned = pool.tune(PoolTuning.builder().reclaimOrder(ReclaimOrder.COLDEST_IN_ORDER)
                    .reclaimHysteresis(0.0).build());
            assertThat(tuned.reclaimOrder()).isEqualTo(ReclaimOrder.COLDEST_IN_ORDER);
            assertThat(tuned.reclaimHysteresis()).isZero();
            assertThatThrownBy(() -> pool.tune(PoolTuning.builder().reclaimHysteresis(1.5).build()))
                    .isInstanceOf(IllegalArgumentException.class)
                    .hasMessage("gpupool.memory.reclaimHysteresis = 1.5 is invalid; allowed: [0, 1]");
            assertThat(pool.config().reclaimHysteresis()).as("a rejected tuning changes nothing").isZero();
        }
    }

    /** Stamps by hand through the three steps: a split of a merged block gives each piece what its units held. */
    @Test
    void aSplitOfAMergedBlockGivesEachPieceTheStampOfItsOwnUnits() {
        FreeStamps stamps = new FreeStamps(8);
        FreeStamps.Clock clock = new FreeStamps.Clock();
        stamps.stampRange(0, 2, 3, clock);                          // units 0-1 freed at 1: one order-1 piece
        stamps.stampRange(2, 4, 3, clock);                          // units 2-3 freed at 2
        stamps.merge(0, 1);                                         // the two merge: order 2 at 0, newer = 2
        assertThat(stamps.stamp(0, 2)).isEqualTo(2);
        stamps.resolveSplit(0, 2, 0, 1, 3);                         // an allocation of one unit splits it
        assertThat(stamps.stamp(2, 1)).as("upper half: freed at 2").isEqualTo(2);
        assertThat(stamps.stamp(1, 0)).as("tail of the lower half: freed at 1, not the merged block's 2").isEqualTo(1);
        stamps.stampRange(4, 8, 3, clock);                          // 4 units freed whole at 3
        stamps.resolveRange(4, 2, 5, 8, 3);                         // a unit at 4 taken, the tail pushed back
        assertThat(stamps.stamp(5, 0)).isEqualTo(3);
        assertThat(stamps.stamp(6, 1)).isEqualTo(3);
        assertThat(FreeStamps.NONE.stamp(0, 0)).isZero();
    }

    @Test
    void theSortPutsTheColdestLastAndOnATieTheHighestKey() {
        Random random = new Random(3);
        for (int round = 0; round < 200; round++) {
            int n = random.nextInt(40);
            long[] keys = random.longs(n, 0, 1000).distinct().toArray();
            long[] stamps = random.longs(keys.length, 0, 6).toArray();
            long[][] expected = new long[keys.length][];
            for (int i = 0; i < keys.length; i++) {
                expected[i] = new long[] {stamps[i], keys[i]};
            }
            Arrays.sort(expected, Comparator.<long[]>comparingLong(p -> -p[0]).thenComparingLong(p -> p[1]));
            ReclaimChoice.sortNewestFirst(keys, stamps, keys.length);
            for (int i = 0; i < keys.length; i++) {
                assertThat(new long[] {stamps[i], keys[i]}).as("round %d, index %d", round, i).containsExactly(expected[i]);
            }
        }
    }
}
