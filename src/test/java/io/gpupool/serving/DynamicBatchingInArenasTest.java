package io.gpupool.serving;

import org.junit.jupiter.api.Test;
import org.springframework.test.web.reactive.server.EntityExchangeResult;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Every dynamic batching test again with {@code gpupool.serving.request-arena} (the model loaded with
 * LoadTarget#requestArena): batches of mixed lengths and selections, failures, cancellations, and a batch split
 * under the pool's headroom, which the batcher now measures in arena bytes. And each forward, alone or batched,
 * takes one block.
 */
class DynamicBatchingInArenasTest extends DynamicBatchingTest {

    @Override
    boolean requestArena() {
        return true;
    }

    @Test
    void eachForwardAloneOrBatchedTakesOneBlock() throws Exception {
        long before = activations.metrics().counters().allocations();
        CompletableFuture<EntityExchangeResult<byte[]>> blocker = block();
        List<CompletableFuture<EntityExchangeResult<byte[]>>> answers = new ArrayList<>();
        for (int i = 0; i < 3; i++) {
            answers.add(send(client, body("m" + i, i, 1 + i, 6 + 5 * i, i, List.of())));
        }
        await("three wait", () -> batcher.waiting(0) == 3);
        bert.release();

        assertThat(blocker.get(20, TimeUnit.SECONDS).getStatus().value()).isEqualTo(200);
        for (CompletableFuture<EntityExchangeResult<byte[]>> answer : answers) {
            assertThat(answer.get(20, TimeUnit.SECONDS).getStatus().value()).isEqualTo(200);
        }
        assertThat(bert.batchSizes).as("the blocker alone, then the three together").containsExactly(1, 3);
        assertThat(activations.metrics().counters().allocations() - before)
                .as("one block for the blocker's forward, one for the batch's").isEqualTo(2);
        assertThat(activations.currentBytes()).isZero();
    }
}
