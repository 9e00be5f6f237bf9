package io.gpupool.model.plan;

import io.gpupool.memory.OutOfDeviceMemoryException;
import io.gpupool.model.ExecutionContext;
import io.gpupool.model.testing.TestStream;
import io.gpupool.model.testing.TrackingAllocator;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Combinators;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.constraints.IntRange;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;

import static io.gpupool.model.plan.ExecutionPlan.ids;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * Plans run in one arena per request ({@link ExecutionPlan.Builder#requestArena}): what every step sees is what
 * it would see with a block per tensor (distinct memory for every live tensor, address 0 for absent and dead
 * ones), one block is taken and given back, and the planned peak is that block.
 */
class ExecutionPlanArenaTest {

    /** The chain of {@link ChainPlan}; {@code build(true)} runs it in an arena. */
    private final ChainPlan chain = new ChainPlan();

    @Test
    void aChainsArenaIsItsLivenessPeakAndIsWhatThePlanCharges() {
        ExecutionPlan plan = chain.build(true);
        assertThat(plan.livenessPeakBytes(1, 0)).isEqualTo(1024 + 2048 + 256);
        assertThat(plan.arenaBytes(1, 0)).isEqualTo(plan.livenessPeakBytes(1, 0));
        assertThat(plan.peakBytes(1, 0)).isEqualTo(plan.arenaBytes(1, 0));
        assertThat(plan.largestAllocationBytes(1, 0)).as("the arena is the one allocation").isEqualTo(3328);
        // A pool handing out 2 KiB blocks rounds the one arena, not each tensor.
        assertThat(plan.peakBytes(1, 0, bytes -> (bytes + 2047) / 2048 * 2048)).isEqualTo(4096);
        assertThat(chain.build(false).peakBytes(1, 0, bytes -> (bytes + 2047) / 2048 * 2048)).isEqualTo(3 * 2048);
    }

    @Test
    void stepsSeeWhatTheySeeWithABlockPerTensorAndOneBlockIsTakenAndGivenBack() {
        ExecutionPlan plan = chain.build(true);
        TrackingAllocator allocator = new TrackingAllocator();
        try (TestStream stream = new TestStream(0)) {
            ExecutionContext context = new ExecutionContext(stream, allocator, null);
            plan.run(context, 2, 0, null, null);
            assertThat(chain.events).containsExactly("0:true,true", "1", "2:a=0", "3");
            assertThat(allocator.metrics().counters().allocations()).isEqualTo(1);
            assertThat(allocator.peakBytes()).isEqualTo(plan.arenaBytes(2, 0));
            assertThat(allocator.outstandingBlocks()).isZero();

            chain.events.clear();
            ChainPlan.runWithout(plan, context, ChainPlan.D);
            assertThat(chain.events.getFirst()).isEqualTo("0:true,false");

            long before = allocator.metrics().counters().allocations();
            assertThatThrownBy(() -> ChainPlan.runWithout(plan, context, ChainPlan.A))
                    .hasMessageContaining("tensor 'a' is required");
            assertThat(allocator.metrics().counters().allocations()).as("refused before allocating").isEqualTo(before);
            assertThat(allocator.outstandingBlocks()).isZero();
        }
        allocator.close();
    }

    @Test
    void aStepThatThrowsDrainsTheStreamAndGivesTheArenaBack() {
        TrackingAllocator allocator = new TrackingAllocator();
        try (TestStream stream = new TestStream(0)) {
            assertThatThrownBy(() -> ChainPlan.exploding(true).run(new ExecutionContext(stream, allocator, null), 1, 0, null, null))
                    .hasMessage("boom");
            assertThat(allocator.outstandingBlocks()).isZero();

            stream.failAtTask(1);                           // the stream's own work fails: seen at synchronize
            ExecutionPlan.Builder q = ExecutionPlan.builder().requestArena(true);
            int x = q.tensor("x", (batch, seq) -> 64);
            q.step("write x", ids(), ids(x), inv -> inv.context().stream().enqueueHostTask(() -> { }));
            q.step("read x", ids(x), ids(), inv -> { });
            assertThatThrownBy(() -> q.build().run(new ExecutionContext(stream, allocator, null), 1, 0, null, null))
                    .hasMessageContaining("injected failure");
            assertThat(allocator.outstandingBlocks()).isZero();
        }
        allocator.close();
    }

    @Test
    void aRefusedArenaLeavesNothingBehind() {
        TrackingAllocator allocator = new TrackingAllocator();
        allocator.failAtAllocation(1);
        try (TestStream stream = new TestStream(0)) {
            assertThatThrownBy(() -> chain.build(true).run(new ExecutionContext(stream, allocator, null), 1, 0, null, null))
                    .isInstanceOf(OutOfDeviceMemoryException.class);
            assertThat(chain.events).as("no step ran").isEmpty();
            assertThat(allocator.outstandingBlocks()).isZero();
        }
        allocator.close();
    }

    @Test
    void packingsAreKeptForABoundedNumberOfShapes() {
        ExecutionPlan plan = chain.build(true);
        for (int batch = 1; batch <= ArenaLayouts.CAPACITY + 40; batch++) {
            assertThat(plan.peakBytes(batch, 0)).isGreaterThanOrEqualTo(plan.livenessPeakBytes(batch, 0));
        }
        assertThat(plan.cachedArenaShapes()).isEqualTo(ArenaLayouts.CAPACITY);
        assertThat(plan.arenaBytes(1, 0)).as("an evicted shape packs again, the same way").isEqualTo(3328);
    }

    // ---- random plans --------------------------------------------------------------------------

    /**
     * A random plan: tensor t is written first at step {@code birth[t]} and read last at {@code death[t]}
     * (some read in between too, some written twice), of {@code perRow[t]} bytes per batch row (0: no bytes);
     * tensors {@code t % 5 == 4} are optional.
     */
    record RandomPlan(int steps, int[] birth, int[] death, long[] perRow, int[][] extraReads) {
    }

    @Provide
    Arbitrary<RandomPlan> plans() {
        return Arbitraries.integers().between(1, 30).flatMap(steps -> Arbitraries.integers().between(1, 40)
                .flatMap(tensors -> Combinators.combine(
                        Arbitraries.integers().between(0, steps - 1).array(int[].class).ofSize(tensors),
                        Arbitraries.integers().between(0, 5).array(int[].class).ofSize(tensors),
                        Arbitraries.frequency(net.jqwik.api.Tuple.of(1, 0L), net.jqwik.api.Tuple.of(3, 1L),
                                        net.jqwik.api.Tuple.of(3, 2L), net.jqwik.api.Tuple.of(3, 3L))
                                .flatMap(kind -> switch (kind.intValue()) {
                                    case 0 -> Arbitraries.just(0L);
                                    case 1 -> Arbitraries.longs().between(1, 512);
                                    case 2 -> Arbitraries.longs().between(512, 64 * 1024);
                                    default -> Arbitraries.longs().between(64 * 1024, 4 << 20);
                                }).array(long[].class).ofSize(tensors),
                        Arbitraries.integers().between(0, steps - 1).array(int[].class).ofSize(tensors))
                        .as((birth, span, perRow, extra) -> {
                            int[] death = new int[tensors];
                            int[][] extraReads = new int[tensors][];
                            for (int t = 0; t < tensors; t++) {
                                death[t] = Math.min(steps - 1, birth[t] + span[t]);
                                int between = birth[t] + (death[t] > birth[t] ? extra[t] % (death[t] - birth[t]) : 0);
                                extraReads[t] = new int[]{between};
                            }
                            return new RandomPlan(steps, birth, death, perRow, extraReads);
                        })));
    }

    @Property(tries = 200)
    void liveTensorsNeverShareAByteAndTheArenaHoldsAtLeastTheLivenessPeak(@ForAll("plans") RandomPlan random,
                                                                         @ForAll @IntRange(min = 1, max = 4) int batch,
                                                                         @ForAll boolean maskAbsent) {
        int n = random.birth().length;
        List<String> overlaps = new ArrayList<>();
        int[] seen = new int[random.steps()];
        ExecutionPlan.Builder b = ExecutionPlan.builder().requestArena(true);
        for (int t = 0; t < n; t++) {
            long perRow = random.perRow()[t];
            ExecutionPlan.Size size = (rows, seq) -> perRow * rows;
            if (t % 5 == 4) {
                b.optionalTensor("t" + t, size);
            } else {
                b.tensor("t" + t, size);
            }
        }
        for (int i = 0; i < random.steps(); i++) {
            List<Integer> reads = new ArrayList<>();
            List<Integer> writes = new ArrayList<>();
            for (int t = 0; t < n; t++) {
                if (random.birth()[t] == i) {
                    writes.add(t);
                } else if (random.death()[t] == i || random.extraReads()[t][0] == i && random.birth()[t] < i) {
                    reads.add(t);
                }
            }
            int step = i;
            b.step("s" + i, reads.stream().mapToInt(Integer::intValue).toArray(),
                    writes.stream().mapToInt(Integer::intValue).toArray(), inv -> {
                        List<Integer> live = new ArrayList<>();
                        for (int t = 0; t < n; t++) {
                            if (inv.address(t) != 0) {
                                live.add(t);
                            }
                        }
                        seen[step] = live.size();
                        for (int x = 0; x < live.size(); x++) {
                            for (int y = x + 1; y < live.size(); y++) {
                                int p = live.get(x);
                                int q = live.get(y);
                                long pEnd = inv.address(p) + ExecutionPlan.ALIGNED.applyAsLong(random.perRow()[p] * inv.batch());
                                long qEnd = inv.address(q) + ExecutionPlan.ALIGNED.applyAsLong(random.perRow()[q] * inv.batch());
                                if (!(pEnd <= inv.address(q) || qEnd <= inv.address(p))) {
                                    overlaps.add("step " + step + ": t" + p + " and t" + q);
                                }
                            }
                        }
                    });
        }
        ExecutionPlan plan = b.build();
        boolean[] absent = new boolean[n];
        for (int t = 4; t < n; t += 5) {
            absent[t] = maskAbsent;
        }
        TrackingAllocator allocator = new TrackingAllocator();
        try (TestStream stream = new TestStream(0)) {
            plan.run(new ExecutionContext(stream, allocator, null), batch, 0, absent, null);
        }
        assertThat(overlaps).isEmpty();
        for (int i = 0; i < random.steps(); i++) {
            int expected = 0;
            for (int t = 0; t < n; t++) {
                boolean alive = random.birth()[t] <= i && i <= random.death()[t];
                if (alive && random.perRow()[t] > 0 && !absent[t]) {
                    expected++;
                }
            }
            assertThat(seen[i]).as("tensors with an address at step %d", i).isEqualTo(expected);
        }
        long arena = plan.arenaBytes(batch, 0);
        assertThat(arena).isGreaterThanOrEqualTo(plan.livenessPeakBytes(batch, 0));
        assertThat(allocator.peakBytes()).as("one block of the arena's bytes").isEqualTo(arena);
        assertThat(allocator.metrics().counters().allocations()).isEqualTo(arena > 0 ? 1 : 0);
        assertThat(allocator.outstandingBlocks()).isZero();
        allocator.close();
    }
}
