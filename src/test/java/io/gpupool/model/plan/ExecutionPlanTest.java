package io.gpupool.model.plan;

import io.gpupool.model.ExecutionContext;
import io.gpupool.model.testing.TestStream;
import io.gpupool.model.testing.TrackingAllocator;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;

import static io.gpupool.model.plan.ExecutionPlan.ids;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class ExecutionPlanTest {

    /**
     * a (1000 B) -> b (2000 B) -> c (300 B), and d (100 B) written first and read last:
     * step 0 writes a, d; step 1 a->b; step 2 b->c; step 3 reads c, d.
     * Alive per step (rounded to 256): {a 1024, d 256} {a, b 2048, d} {b, c 512, d} {c, d}
     * so the peak is at step 1: 1024 + 2048 + 256 = 3328.
     */
    private final List<String> events = new ArrayList<>();

    private ExecutionPlan chain() {
        ExecutionPlan.Builder b = ExecutionPlan.builder();
        int a = b.tensor("a", (batch, seq) -> 1000L * batch);
        int bb = b.tensor("b", (batch, seq) -> 2000L * batch);
        int c = b.tensor("c", (batch, seq) -> 300L * batch);
        int d = b.optionalTensor("d", (batch, seq) -> 100L * batch);
        b.step("write a, d", ids(), ids(a, d), inv -> events.add("0:" + (inv.address(a) != 0) + "," + (inv.address(d) != 0)));
        b.step("a -> b", ids(a), ids(bb), inv -> events.add("1"));
        b.step("b -> c", ids(bb), ids(c), inv -> events.add("2:a=" + inv.address(a)));
        b.step("read c, d", ids(c, d), ids(), inv -> events.add("3"));
        return b.build();
    }

    @Test
    void peakIsTheLargestSumOfLiveTensors() {
        ExecutionPlan plan = chain();
        assertThat(plan.peakBytes(1, 0)).isEqualTo(1024 + 2048 + 256);
        assertThat(plan.largestAllocationBytes(1, 0)).isEqualTo(2048);
    }

    @Test
    void runAllocatesAtBirthReleasesAfterDeathAndPeaksAsPlanned() {
        ExecutionPlan plan = chain();
        TrackingAllocator allocator = new TrackingAllocator();
        try (TestStream stream = new TestStream(0)) {
            plan.run(new ExecutionContext(stream, allocator, null), 2, 0, null, null);

            assertThat(events).containsExactly("0:true,true", "1", "2:a=0", "3");
            assertThat(allocator.peakBytes()).isEqualTo(plan.peakBytes(2, 0));
            assertThat(allocator.outstandingBlocks()).isZero();

            events.clear();
            boolean[] absent = new boolean[plan.tensorCount()];
            absent[3] = true;
            plan.run(new ExecutionContext(stream, allocator, null), 1, 0, absent, null);
            assertThat(events.getFirst()).isEqualTo("0:true,false");
            absent = new boolean[plan.tensorCount()];
            absent[0] = true;
            boolean[] requiredAbsent = absent;
            assertThatThrownBy(() -> plan.run(new ExecutionContext(stream, allocator, null), 1, 0, requiredAbsent, null))
                    .hasMessageContaining("tensor 'a' is required");
            assertThat(allocator.outstandingBlocks()).isZero();
        }
        allocator.close();
    }

    @Test
    void aStepThatThrowsReleasesEverythingTaken() {
        ExecutionPlan.Builder b = ExecutionPlan.builder();
        int a = b.tensor("a", (batch, seq) -> 64);
        int c = b.tensor("c", (batch, seq) -> 64);
        b.step("write a", ids(), ids(a), inv -> { });
        b.step("explode", ids(a), ids(c), inv -> {
            throw new IllegalStateException("boom");
        });
        b.step("read c", ids(c), ids(), inv -> { });
        TrackingAllocator allocator = new TrackingAllocator();
        try (TestStream stream = new TestStream(0)) {
            assertThatThrownBy(() -> b.build().run(new ExecutionContext(stream, allocator, null), 1, 0, null, null))
                    .hasMessage("boom");
            assertThat(allocator.outstandingBlocks()).isZero();
        }
        allocator.close();
    }

    @Test
    void readingATensorNoStepWroteIsABuildError() {
        ExecutionPlan.Builder b = ExecutionPlan.builder();
        int a = b.tensor("a", (batch, seq) -> 64);
        b.step("read a", ids(a), ids(), inv -> { });
        assertThatThrownBy(b::build).hasMessageContaining("step 'read a' reads tensor 'a' before any step writes it");
    }
}
