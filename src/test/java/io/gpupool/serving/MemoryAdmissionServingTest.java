package io.gpupool.serving;

import io.gpupool.memory.MemoryAdmission;
import io.gpupool.memory.PoolConfig;
import io.gpupool.memory.pool.DevicePool;
import io.gpupool.serving.fake.PlannedTestModel;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.springframework.http.MediaType;
import org.springframework.test.web.reactive.server.EntityExchangeResult;
import reactor.core.Disposable;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.BrokenBarrierException;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicBoolean;

import static io.gpupool.serving.InferenceEndpointsTest.await;
import static io.gpupool.serving.InferenceEndpointsTest.waitFor;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * Requests under the pool's cap wait for their planned memory instead of failing: the real two-level pool
 * over host memory, capped at 8 MiB, in front of model {@code planned}, which holds 2 MiB per batch row while
 * its gate runs (so 4 rows fill the cap).
 */
class MemoryAdmissionServingTest {

    private static final long MIB = PoolConfig.MIB;

    private ServingFixture fixture;

    @AfterEach
    void close() {
        if (fixture != null) {
            fixture.close();
        }
    }

    private ServingFixture capped() {
        fixture = ServingFixture.builder().realPool(8 * MIB).admission().planned(2 * MIB).streams(4).noWarmUp().build();
        // As gpupool.serving.warm-up=false: a dry run at the largest batch (16 MiB) would not fit the cap.
        fixture.registry.models().forEach(ServedModel::markReady);
        fixture.registry.markWarmedUp();
        return fixture;
    }

    private PlannedTestModel model() {
        return fixture.planned.get(0);
    }

    private MemoryAdmission admission() {
        return fixture.runtimes.getFirst().worker().admission();
    }

    private DevicePool pool() {
        return fixture.pools.getFirst();
    }

    private static String body(int rows, long timeoutMicros) {
        List<String> values = Collections.nCopies(rows * 4, "1");
        String parameters = timeoutMicros > 0 ? ", \"parameters\": {\"timeout\": " + timeoutMicros + "}" : "";
        return "{\"inputs\": [{\"name\": \"x\", \"shape\": [" + rows + ", 4], \"datatype\": \"FP32\", \"data\": ["
                + String.join(", ", values) + "]}]" + parameters + "}";
    }

    private EntityExchangeResult<String> infer(int rows, long timeoutMicros) {
        return fixture.client.post().uri("/v2/models/planned/infer").contentType(MediaType.APPLICATION_JSON)
                .bodyValue(body(rows, timeoutMicros)).exchange().expectBody(String.class).returnResult();
    }

    /** Sends a request on a thread of its own; its status lands in {@code statuses}. */
    private Thread inferAsync(int rows, List<Integer> statuses) {
        return Thread.ofPlatform().start(() -> statuses.add(infer(rows, 0).getStatus().value()));
    }

    /** Everything the requests took is back: nothing admitted, nothing allocated once the caches are flushed. */
    private void assertDrained() {
        waitFor(() -> admission().running() == 0);
        assertThat(admission().admittedBytes()).isZero();
        assertThat(admission().waiting()).isZero();
        pool().trim();
        assertThat(pool().metrics().allocatedBytes()).isZero();
    }

    @Test
    void concurrentRequestsWhosePeaksTogetherExceedTheCapAllSucceed() throws Exception {
        capped();
        // Each request holds 4 MiB: two fill the cap. Two at a time must meet at the barrier; a third running
        // beside them would have found the cap reached and failed with 507.
        CyclicBarrier pairs = new CyclicBarrier(2);
        model().gate = rows -> {
            try {
                pairs.await(10, TimeUnit.SECONDS);
            } catch (InterruptedException | BrokenBarrierException | TimeoutException e) {
                throw new IllegalStateException("no second request ran beside this one", e);
            }
        };
        List<Integer> statuses = Collections.synchronizedList(new ArrayList<>());
        List<Thread> clients = new ArrayList<>();
        for (int i = 0; i < 6; i++) {
            clients.add(inferAsync(2, statuses));
        }
        for (Thread client : clients) {
            client.join(20_000);
        }

        assertThat(statuses).hasSize(6).containsOnly(200);
        assertThat(model().mostRunning).hasValue(2);
        assertThat(admission().waitedCount()).isPositive();
        assertThat(admission().refusedCount()).isZero();
        assertThat(pool().metrics().counters().failures()).isZero();
        assertDrained();
    }

    @Test
    void aRequestLargerThanTheCapCanEverGiveIs507AtOnceNamingTheBytes() {
        capped();
        EntityExchangeResult<String> refused = infer(5, 0);

        assertThat(refused.getStatus().value()).isEqualTo(507);
        assertThat(refused.getResponseBody())
                .contains("needs " + 10 * MIB + " bytes")
                .contains("the " + 8 * MIB + " bytes the pool on host can ever give")
                .contains("gpupool.memory.cap-bytes");
        assertThat(model().invocations).hasValue(0);
        assertThat(admission().refusedCount()).isEqualTo(1);
        assertThat(infer(4, 0).getStatus().value()).isEqualTo(200);   // exactly the cap is served
        assertDrained();
    }

    @Test
    void aRequestThatTimesOutWaitingForMemoryGets504AndLeavesNothingBehind() throws Exception {
        capped();
        CountDownLatch release = new CountDownLatch(1);
        model().gate = rows -> {
            if (rows == 4) {
                await(release);
            }
        };
        List<Integer> statuses = Collections.synchronizedList(new ArrayList<>());
        Thread holder = inferAsync(4, statuses);
        waitFor(() -> model().running.get() == 1);

        EntityExchangeResult<String> waited = infer(1, 100_000);   // 0.1 s; the holder keeps the cap meanwhile

        assertThat(waited.getStatus().value()).isEqualTo(504);
        assertThat(waited.getResponseBody()).contains("did not finish within its timeout");
        waitFor(() -> admission().waiting() == 0);
        assertThat(admission().abandonedCount()).isEqualTo(1);
        release.countDown();
        holder.join(10_000);
        assertThat(statuses).containsExactly(200);
        assertThat(model().invocations).hasValue(1);               // the one that timed out never ran
        assertDrained();
    }

    @Test
    void aCancelledWaiterLeavesTheQueueAndNothingLeaks() throws Exception {
        capped();
        CountDownLatch release = new CountDownLatch(1);
        model().gate = rows -> await(release);
        List<Integer> statuses = Collections.synchronizedList(new ArrayList<>());
        Thread holder = inferAsync(4, statuses);
        waitFor(() -> model().running.get() == 1);
        AtomicBoolean ran = new AtomicBoolean();
        Disposable waiter = fixture.runtimes.getFirst().worker().submit(2 * MIB, context -> {
            ran.set(true);
            return 0;
        }).subscribe();
        waitFor(() -> admission().waiting() == 1);

        waiter.dispose();                                          // what a client disconnect does

        assertThat(admission().waiting()).isZero();
        assertThat(admission().waitingBytes()).isZero();
        assertThat(admission().abandonedCount()).isEqualTo(1);
        release.countDown();
        holder.join(10_000);
        assertThat(statuses).containsExactly(200);
        assertThat(ran).isFalse();
        assertDrained();
    }

    @Test
    void aRequestThatRunsOutOfMemoryBesideOthersBecauseItsPlanUnderestimatesRunsAgainAloneInsteadOf507()
            throws Exception {
        capped();
        model().unplannedBytes = 2 * MIB;                          // every forward takes a block its plan omits
        CountDownLatch release = new CountDownLatch(1);
        model().gate = rows -> {
            if (rows == 2) {
                await(release);
            }
        };
        List<Integer> statuses = Collections.synchronizedList(new ArrayList<>());
        Thread holder = inferAsync(2, statuses);                   // planned 4 MiB, holds 6
        waitFor(() -> model().running.get() == 1);
        Thread second = inferAsync(1, statuses);                   // planned 2 MiB: admitted, needs 4, finds 2
        waitFor(() -> admission().aloneCount() == 1 && admission().waiting() == 1);
        assertThat(pool().metrics().counters().failures()).isPositive();

        release.countDown();
        holder.join(10_000);
        second.join(10_000);

        assertThat(statuses).containsExactlyInAnyOrder(200, 200);
        assertThat(model().invocations).hasValue(3);               // the second ran twice: beside, then alone
        assertDrained();
    }

    /** What {@code /v2/models/planned/stats} says, as a client reads it. */
    private tools.jackson.databind.JsonNode stats() {
        byte[] body = fixture.client.get().uri("/v2/models/planned/stats").exchange().expectStatus().isOk()
                .expectBody().returnResult().getResponseBody();
        return ServingFixture.JSON.readTree(body).path("model_stats").get(0);
    }

    /** Sends two requests, the second running out of memory beside the first (its plan omits 2 MiB). */
    private List<Integer> secondRunsOutOfMemoryBesideTheFirstThenAlone() throws Exception {
        model().unplannedBytes = 2 * MIB;
        CountDownLatch release = new CountDownLatch(1);
        model().gate = rows -> {
            if (rows == 2) {
                await(release);
            }
        };
        List<Integer> statuses = Collections.synchronizedList(new ArrayList<>());
        Thread holder = inferAsync(2, statuses);
        waitFor(() -> model().running.get() == 1);
        Thread second = inferAsync(1, statuses);
        waitFor(() -> admission().aloneCount() == 1 && admission().waiting() == 1);
        release.countDown();
        holder.join(10_000);
        second.join(10_000);
        return statuses;
    }

    @Test
    void aRequestRunAgainAloneAfterRunningOutOfMemoryCountsAsOneInferenceAndOneExecution() throws Exception {
        capped();
        List<Integer> statuses = secondRunsOutOfMemoryBesideTheFirstThenAlone();

        assertThat(statuses).containsExactlyInAnyOrder(200, 200);
        assertThat(model().invocations).as("the second ran twice: beside, then alone").hasValue(3);
        tools.jackson.databind.JsonNode stats = stats();
        assertThat(stats.path("inference_count").asLong()).as("rows the clients were answered").isEqualTo(3);
        assertThat(stats.path("execution_count").asLong()).as("forwards that answered someone").isEqualTo(2);
        assertThat(stats.path("inference_stats").path("success").path("count").asLong()).isEqualTo(2);
        assertThat(stats.path("inference_stats").path("fail").path("count").asLong()).isZero();
        BatchStatistics.Snapshot counts = fixture.service.statistics().snapshot("planned");
        assertThat(counts.executions()).as("the forward cut short by out-of-memory is no execution").isEqualTo(2);
        assertThat(counts.requests()).isEqualTo(2);
        assertThat(counts.inferences()).isEqualTo(3);
        assertDrained();
    }

    @Test
    void aBatchRunAgainAloneAfterRunningOutOfMemoryCountsItsRequestsAndQueueDelayOnce() throws Exception {
        fixture = ServingFixture.builder().realPool(8 * MIB).admission().planned(2 * MIB).streams(4).batching()
                .noWarmUp().build();
        fixture.registry.models().forEach(ServedModel::markReady);
        fixture.registry.markWarmedUp();
        List<Integer> statuses = secondRunsOutOfMemoryBesideTheFirstThenAlone();

        assertThat(statuses).containsExactlyInAnyOrder(200, 200);
        assertThat(model().invocations).hasValue(3);
        BatchStatistics.Snapshot counts = fixture.batcher.statistics().snapshot("planned");
        assertThat(counts.executions()).isEqualTo(2);
        assertThat(counts.requests()).isEqualTo(2);
        assertThat(counts.inferences()).isEqualTo(3);
        assertThat(counts.queueDelay().count()).as("one queue delay per request").isEqualTo(2);
        tools.jackson.databind.JsonNode stats = stats();
        assertThat(stats.path("inference_count").asLong()).isEqualTo(3);
        assertThat(stats.path("execution_count").asLong()).isEqualTo(2);
        assertThat(stats.path("inference_stats").path("success").path("count").asLong()).isEqualTo(2);
        assertDrained();
    }

    @Test
    void aRequestThatRunsOutOfMemoryEvenAloneIs507() {
        capped();
        model().unplannedBytes = 2 * MIB;
        EntityExchangeResult<String> alone = infer(4, 0);          // planned 8 MiB, the whole cap, needs 10

        assertThat(alone.getStatus().value()).isEqualTo(507);
        assertThat(alone.getResponseBody()).contains("out of device memory");
        assertThat(admission().aloneCount()).isEqualTo(1);         // retried once alone; then waiting cannot help
        assertThat(model().invocations).hasValue(2);
        tools.jackson.databind.JsonNode stats = stats();
        assertThat(stats.path("inference_stats").path("fail").path("count").asLong()).as("one request failed")
                .isEqualTo(1);
        assertThat(stats.path("execution_count").asLong()).as("no forward ran to its end").isZero();
        assertThat(fixture.service.statistics().snapshot("planned").executions()).isZero();
        assertDrained();
    }

    @Test
    void batchesThatWouldPassTheCapAreSplitAndWaitInsteadOfFailing() throws Exception {
        fixture = ServingFixture.builder().realPool(8 * MIB).admission().planned(2 * MIB).streams(2).batching()
                .noWarmUp().build();
        fixture.registry.models().forEach(ServedModel::markReady);
        fixture.registry.markWarmedUp();
        CountDownLatch releaseLarge = new CountDownLatch(1);
        CountDownLatch releaseSmall = new CountDownLatch(1);
        java.util.concurrent.atomic.AtomicBoolean smallHeld = new java.util.concurrent.atomic.AtomicBoolean();
        model().gate = rows -> {
            if (rows == 3) {
                await(releaseLarge);
            } else if (rows == 1 && smallHeld.compareAndSet(false, true)) {
                await(releaseSmall);                               // only the first single request is held
            }
        };
        List<Integer> statuses = Collections.synchronizedList(new ArrayList<>());
        List<Thread> clients = new ArrayList<>();
        clients.add(inferAsync(3, statuses));                      // 6 MiB on one stream
        waitFor(() -> model().running.get() == 1);
        clients.add(inferAsync(1, statuses));                      // 2 MiB on the other: the cap is full
        waitFor(() -> model().running.get() == 2);
        for (int i = 0; i < 4; i++) {
            clients.add(inferAsync(1, statuses));                  // 8 MiB together: more than any room left
        }
        waitFor(() -> fixture.batcher.waiting(0) == 4);

        releaseLarge.countDown();                                  // 6 MiB free while 2 MiB stay held: 8 MiB cannot run
        waitFor(() -> fixture.batcher.statistics().snapshot("planned").splitsForMemory() > 0);
        releaseSmall.countDown();
        for (Thread client : clients) {
            client.join(20_000);
        }

        assertThat(statuses).hasSize(6).containsOnly(200);
        assertThat(model().mostRowsRunning.get()).as("rows held at once, 2 MiB each under 8 MiB").isLessThanOrEqualTo(4);
        assertThat(fixture.batcher.statistics().snapshot("planned").splitsForMemory()).isPositive();
        assertThat(admission().refusedCount()).isZero();
        assertThat(pool().metrics().counters().failures()).isZero();
        assertDrained();
    }

    @Test
    void requestsAreAdmittedInArrivalOrderAndASmallerLaterOneDoesNotPass() throws Exception {
        capped();
        CountDownLatch releaseFirst = new CountDownLatch(1);
        CountDownLatch releaseSecond = new CountDownLatch(1);
        List<Integer> started = Collections.synchronizedList(new ArrayList<>());
        model().gate = rows -> {
            started.add(rows);
            if (rows == 2) {
                await(releaseFirst);
            } else if (rows == 4) {
                await(releaseSecond);
            }
        };
        List<Integer> statuses = Collections.synchronizedList(new ArrayList<>());
        Thread first = inferAsync(2, statuses);                    // 4 MiB, runs
        waitFor(() -> model().running.get() == 1);
        Thread second = inferAsync(4, statuses);                   // 8 MiB: waits for the first
        waitFor(() -> admission().waiting() == 1);
        Thread third = inferAsync(1, statuses);                    // 2 MiB would fit beside the first: still waits
        waitFor(() -> admission().waiting() == 2);
        assertThat(started).containsExactly(2);

        releaseFirst.countDown();
        waitFor(() -> started.size() == 2);
        assertThat(started).containsExactly(2, 4);
        assertThat(admission().waiting()).isEqualTo(1);            // the third waits for the whole cap to free
        releaseSecond.countDown();
        for (Thread client : List.of(first, second, third)) {
            client.join(10_000);
        }
        assertThat(started).containsExactly(2, 4, 1);
        assertThat(statuses).containsOnly(200).hasSize(3);
        assertDrained();
    }
}
