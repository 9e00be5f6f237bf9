package io.gpupool.serving;

import io.gpupool.model.ModelConfig;
import io.gpupool.serving.fake.PlannedTestModel;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.springframework.http.MediaType;
import org.springframework.test.web.reactive.server.EntityExchangeResult;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.CountDownLatch;

import static io.gpupool.serving.InferenceEndpointsTest.await;
import static io.gpupool.serving.InferenceEndpointsTest.waitFor;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * The batching counters of requests that bypass their batch queue (one request per batch: every request fills a
 * batch alone) count what ran: a bypass the device refuses because its one stream is busy and its queue holds
 * nothing more is answered 503 and appears in neither {@code bypassed} nor the executions.
 */
class BatchBypassCountingTest {

    private ServingFixture fixture;

    @AfterEach
    void close() {
        if (fixture != null) {
            fixture.close();
        }
    }

    private EntityExchangeResult<String> infer() {
        return fixture.client.post().uri("/v2/models/planned/infer").contentType(MediaType.APPLICATION_JSON)
                .bodyValue("{\"inputs\": [{\"name\": \"x\", \"shape\": [1, 4], \"datatype\": \"FP32\", "
                        + "\"data\": [1, 2, 3, 4]}]}")
                .exchange().expectBody(String.class).returnResult();
    }

    @Test
    void aBypassTheDeviceQueueRefusesWith503IsNotCountedAsBypassedNorExecuted() throws Exception {
        fixture = ServingFixture.builder().planned(1024).streams(1).queue(0).batching().noWarmUp().build();
        fixture.registry.models().forEach(ServedModel::markReady);
        fixture.registry.markWarmedUp();
        PlannedTestModel model = fixture.planned.get(0);
        model.batching = new ModelConfig.Batching(true, 10_000_000L, 1, 4096, List.of());
        CountDownLatch release = new CountDownLatch(1);
        model.gate = rows -> await(release);
        List<Integer> statuses = Collections.synchronizedList(new ArrayList<>());
        Thread holder = Thread.ofPlatform().start(() -> statuses.add(infer().getStatus().value()));
        waitFor(() -> model.running.get() == 1);

        EntityExchangeResult<String> refused = infer();

        assertThat(refused.getStatus().value()).isEqualTo(503);
        assertThat(refused.getResponseBody()).contains("overloaded");
        release.countDown();
        holder.join(10_000);
        assertThat(statuses).containsExactly(200);
        BatchStatistics.Snapshot counts = fixture.batcher.statistics().snapshot("planned");
        assertThat(counts.bypassed()).as("only the request that ran").isEqualTo(1);
        assertThat(counts.executions()).isEqualTo(1);
        assertThat(counts.bypassed()).isLessThanOrEqualTo(counts.executions());
        assertThat(model.invocations).hasValue(1);
    }
}
