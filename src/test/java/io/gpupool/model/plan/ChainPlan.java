package io.gpupool.model.plan;

import io.gpupool.model.ExecutionContext;

import java.util.ArrayList;
import java.util.List;

import static io.gpupool.model.plan.ExecutionPlan.ids;

/**
 * The plans {@link ExecutionPlanTest} and {@link ExecutionPlanArenaTest} both run, with a block per tensor or in one
 * request arena.
 * <pre>
 *   a (1000 B) -> b (2000 B) -> c (300 B), and d (100 B, optional) written first and read last:
 *   step 0 writes a, d; step 1 a->b; step 2 b->c; step 3 reads c, d.
 *   Alive per step (rounded to 256): {a 1024, d 256} {a, b 2048, d} {b, c 512, d} {c, d}
 *   so the peak is at step 1: 1024 + 2048 + 256 = 3328.
 * </pre>
 * Each step adds to {@link #events} what it saw: step 0 whether a and d have addresses, step 2 the address of the
 * dead a.
 */
final class ChainPlan {

    /** Tensor ids in the order {@link #build} declares them. */
    static final int A = 0;
    static final int D = 3;

    final List<String> events = new ArrayList<>();

    ExecutionPlan build(boolean arena) {
        ExecutionPlan.Builder b = ExecutionPlan.builder().requestArena(arena);
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

    /** Runs {@code plan} for one row with {@code tensor} absent. */
    static void runWithout(ExecutionPlan plan, ExecutionContext context, int tensor) {
        boolean[] absent = new boolean[plan.tensorCount()];
        absent[tensor] = true;
        plan.run(context, 1, 0, absent, null);
    }

    /** a is written; the step that reads it and would write c throws "boom"; a last step reads c. */
    static ExecutionPlan exploding(boolean arena) {
        ExecutionPlan.Builder b = ExecutionPlan.builder().requestArena(arena);
        int a = b.tensor("a", (batch, seq) -> 64);
        int c = b.tensor("c", (batch, seq) -> 64);
        b.step("write a", ids(), ids(a), inv -> { });
        b.step("explode", ids(a), ids(c), inv -> {
            throw new IllegalStateException("boom");
        });
        b.step("read c", ids(c), ids(), inv -> { });
        return b.build();
    }
}
