package io.gpupool.model.plan;

import io.gpupool.model.ExecutionContext;
import io.gpupool.model.testing.TestStream;
import io.gpupool.model.testing.TrackingAllocator;
import org.junit.jupiter.api.Test;

import static io.gpupool.model.plan.ExecutionPlan.ids;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class ExecutionPlanTest {

    /** The chain of {@link ChainPlan}, a block per tensor. */
    private final ChainPlan chain = new ChainPlan();

    @Test
    void peakIsTheLargestSumOfLiveTensors() {
        ExecutionPlan plan = chain.build(false);
        assertThat(plan.peakBytes(1, 0)).isEqualTo(1024 + 2048 + 256);
        assertThat(plan.largestAllocationBytes(1, 0)).isEqualTo(2048);
    }

    @Test
    void runAllocatesAtBirthReleasesAfterDeathAndPeaksAsPlanned() {
        ExecutionPlan plan = chain.build(false);
        TrackingAllocator allocator = new TrackingAllocator();
        try (TestStream stream = new TestStream(0)) {
            ExecutionContext context = new ExecutionContext(stream, allocator, null);
            plan.run(context, 2, 0, null, null);

            assertThat(chain.events).containsExactly("0:true,true", "1", "2:a=0", "3");
            assertThat(allocator.peakBytes()).isEqualTo(plan.peakBytes(2, 0));
            assertThat(allocator.outstandingBlocks()).isZero();

            chain.events.clear();
            ChainPlan.runWithout(plan, context, ChainPlan.D);
            assertThat(chain.events.getFirst()).isEqualTo("0:true,false");
            assertThatThrownBy(() -> ChainPlan.runWithout(plan, context, ChainPlan.A))
                    .hasMessageContaining("tensor 'a' is required");
            assertThat(allocator.outstandingBlocks()).isZero();
        }
        allocator.close();
    }

    @Test
    void aStepThatThrowsReleasesEverythingTaken() {
        ExecutionPlan plan = ChainPlan.exploding(false);
        TrackingAllocator allocator = new TrackingAllocator();
        try (TestStream stream = new TestStream(0)) {
            assertThatThrownBy(() -> plan.run(new ExecutionContext(stream, allocator, null), 1, 0, null, null))
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
