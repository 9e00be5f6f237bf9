package io.gpupool.serving;

import io.gpupool.backend.ComputeDevice;
import io.gpupool.backend.DeviceStream;
import io.gpupool.backend.host.HostBackend;
import io.gpupool.kernels.host.HostTensorOps;
import io.gpupool.memory.OutOfDeviceMemoryException;
import io.gpupool.model.BatchableModel;
import io.gpupool.model.DataType;
import io.gpupool.model.HostTensor;
import io.gpupool.model.LoadTarget;
import io.gpupool.model.ModelConfig;
import io.gpupool.model.repository.ModelRepository;
import io.gpupool.model.testing.TrackingAllocator;
import io.gpupool.serving.fake.GatedBatchModel;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.springframework.http.MediaType;
import org.springframework.test.web.reactive.server.EntityExchangeResult;
import org.springframework.test.web.reactive.server.WebTestClient;
import reactor.core.Disposable;
import tools.jackson.databind.JsonNode;

import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.BooleanSupplier;

import static io.gpupool.model.testing.Fixtures.fixture;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * Dynamic batching through the serving stack on the host backend, with the real tiny BERT behind a gate that
 * holds the device's only stream: requests queue behind a running "blocker" and form the next batch when it
 * ends. Each batched response is compared with what a server without batching answers for that request alone.
 * No assertion depends on timing: the tests wait (bounded) for the queue to reach a state, then act.
 */
class DynamicBatchingTest {

    static final String MODEL = "tiny-bert";

    final HostBackend backend = new HostBackend(1L << 30);
    final ComputeDevice device = backend.devices().getFirst();
    final TrackingAllocator activations = new TrackingAllocator();
    final TrackingAllocator weights = new TrackingAllocator();
    final HostTensorOps ops = new HostTensorOps();
    final AtomicLong headroom = new AtomicLong(Long.MAX_VALUE);
    final ExecutorService senders = Executors.newCachedThreadPool();
    DeviceWorker worker;
    GatedBatchModel bert;
    ServedModel served;
    DynamicBatcher batcher;
    InferenceService batching;
    WebTestClient client;
    WebTestClient alone;

    /** Whether the model runs each forward in one arena; {@link DynamicBatchingInArenasTest} runs every test so. */
    boolean requestArena() {
        return false;
    }

    @BeforeEach
    void start() {
        worker = new DeviceWorker(device, activations, ops, 1, 16);
        DeviceStream loading = device.createStream(7);
        bert = new GatedBatchModel((BatchableModel) ModelRepository.loadModel(MODEL, fixture(MODEL),
                new LoadTarget(loading, weights, ops, requestArena())));
        loading.close();
        served = new ServedModel(Map.of(0, bert));
        ModelRegistry registry = new ModelRegistry(List.of(served), List.of());
        List<DeviceRuntime> runtimes = List.of(new DeviceRuntime(device, activations, weights, ops, worker));
        new WarmUp(registry, runtimes, 64, 512).skip();
        batcher = new DynamicBatcher(runtimes, BatchPolicy.Defaults.off(), 16, Map.of(0, headroom::get),
                new BatchStatistics());
        batching = new InferenceService(runtimes, ServingFixture.JSON, InferenceObserver.NONE, batcher);
        InferenceService unbatched = new InferenceService(runtimes, ServingFixture.JSON);
        RequestDecoder decoder = new RequestDecoder(ServingFixture.JSON, 64, 512, Duration.ofSeconds(20));
        ProtocolExtensions extensions = new ProtocolExtensions(new StatisticsHandler(registry, "CPU"),
                new ModelConfigHandler(registry, 64, 1, "KIND_CPU", model -> null), new SharedMemoryHandler(1024),
                new RepositoryHandler(registry, name -> {
                    throw ServingException.notFound("no model folder '" + name + "'");
                }, model -> { }, name -> { }, false, ServingFixture.JSON, 1 << 20));
        client = WebTestClient.bindToRouterFunction(ServingRoutes.routes(new InferenceHandler(registry, decoder,
                batching, ServingFixture.JSON, "test", 1 << 20), extensions))
                .configureClient().responseTimeout(Duration.ofSeconds(60)).build();
        alone = WebTestClient.bindToRouterFunction(ServingRoutes.routes(new InferenceHandler(registry, decoder,
                unbatched, ServingFixture.JSON, "test", 1 << 20), extensions))
                .configureClient().responseTimeout(Duration.ofSeconds(60)).build();
    }

    @AfterEach
    void stop() {
        bert.release();
        senders.shutdownNow();
        batcher.close();
        worker.close();
        assertThat(activations.outstandingBlocks()).as("every activation released").isZero();
        bert.close();
        weights.close();
        activations.close();
        backend.close();
    }

    // ---- requests -------------------------------------------------------------------------------

    /** A JSON request of batch × seq ids (seeded), optionally with a mask padding the last {@code padded} tokens. */
    static String body(String id, int seed, int batch, int seq, int padded, List<String> outputs) {
        StringBuilder ids = new StringBuilder();
        StringBuilder mask = new StringBuilder();
        for (int i = 0; i < batch * seq; i++) {
            boolean real = i % seq < seq - padded;
            ids.append(i == 0 ? "" : ",").append(real ? 1 + (seed * 31 + i * 7) % 99 : 0);
            mask.append(i == 0 ? "" : ",").append(real ? 1 : 0);
        }
        String inputs = "{\"name\":\"input_ids\",\"datatype\":\"INT64\",\"shape\":[" + batch + "," + seq + "],\"data\":["
                + ids + "]}";
        if (padded > 0) {
            inputs += ",{\"name\":\"attention_mask\",\"datatype\":\"INT64\",\"shape\":[" + batch + "," + seq
                    + "],\"data\":[" + mask + "]}";
        }
        String selection = outputs.isEmpty() ? "" : ",\"outputs\":[" + String.join(",",
                outputs.stream().map(o -> "{\"name\":\"" + o + "\"}").toList()) + "]";
        return "{\"id\":\"" + id + "\",\"inputs\":[" + inputs + "]" + selection + "}";
    }

    /** Sends on a thread of its own: each blocks until its answer, and several must wait at once. */
    CompletableFuture<EntityExchangeResult<byte[]>> send(WebTestClient client, String body) {
        return CompletableFuture.supplyAsync(() -> client.post().uri("/v2/models/" + MODEL + "/infer")
                .contentType(MediaType.APPLICATION_JSON).bodyValue(body).exchange().expectBody().returnResult(), senders);
    }

    static JsonNode json(EntityExchangeResult<byte[]> result) {
        return ServingFixture.JSON.readTree(result.getResponseBody());
    }

    /** A request as the service takes it: ids of batch × seq, its own timeout. */
    ValidatedRequest validated(String id, int seed, int batch, int seq, Duration timeout) {
        ByteBuffer data = ByteBuffer.allocate(batch * seq * Long.BYTES).order(ByteOrder.LITTLE_ENDIAN);
        for (int i = 0; i < batch * seq; i++) {
            data.putLong(1 + (seed * 31 + i * 7) % 99);
        }
        return new ValidatedRequest(id, served, List.of(new ValidatedRequest.Input("input_ids", DataType.INT64,
                new long[]{batch, seq}, data.array())), List.of(new ValidatedRequest.Output("pooler_output", false)),
                timeout);
    }

    static void await(String what, BooleanSupplier condition) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        while (!condition.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError("never reached: " + what);
            }
            Thread.sleep(2);
        }
    }

    /** Holds the stream with a running blocker; returns its answer. */
    CompletableFuture<EntityExchangeResult<byte[]>> block() throws InterruptedException {
        bert.hold();
        CompletableFuture<EntityExchangeResult<byte[]>> blocker = send(client, body("blocker", 0, 1, 4, 0, List.of()));
        await("the blocker holds the stream", () -> bert.entered.get() == 1);
        return blocker;
    }

    static void assertSameOutputs(JsonNode batched, JsonNode expected) {
        assertThat(batched.path("id").asString()).isEqualTo(expected.path("id").asString());
        JsonNode a = batched.path("outputs");
        JsonNode b = expected.path("outputs");
        assertThat(a.size()).as("outputs of %s", expected.path("id")).isEqualTo(b.size()).isPositive();
        for (int o = 0; o < b.size(); o++) {
            assertThat(a.get(o).path("name").asString()).isEqualTo(b.get(o).path("name").asString());
            assertThat(a.get(o).path("shape").toString()).isEqualTo(b.get(o).path("shape").toString());
            JsonNode x = a.get(o).path("data");
            JsonNode y = b.get(o).path("data");
            assertThat(x.size()).isEqualTo(y.size());
            for (int i = 0; i < y.size(); i++) {
                assertThat(x.get(i).doubleValue()).as("%s %s[%d]", expected.path("id"), b.get(o).path("name"), i)
                        .isCloseTo(y.get(i).doubleValue(), org.assertj.core.data.Offset.offset(1e-5));
            }
        }
    }

    // ---- tests ------------------------------------------------------------------------------------

    @Test
    void requestsOfMixedLengthsAndSelectionsShareOneForwardAndEachGetsWhatItGetsAlone() throws Exception {
        List<String> bodies = List.of(
                body("a", 1, 3, 10, 4, List.of()),
                body("b", 2, 1, 5, 0, List.of("pooler_output")),
                body("c", 3, 2, 17, 3, List.of("last_hidden_state")),
                body("d", 4, 1, 1, 0, List.of("pooler_output", "last_hidden_state")));
        CompletableFuture<EntityExchangeResult<byte[]>> blocker = block();
        List<CompletableFuture<EntityExchangeResult<byte[]>>> answers = new ArrayList<>();
        for (String body : bodies) {
            answers.add(send(client, body));
        }
        await("four requests wait for a batch", () -> batcher.waiting(0) == 4);
        bert.release();

        assertThat(blocker.get(20, TimeUnit.SECONDS).getStatus().value()).isEqualTo(200);
        for (int i = 0; i < bodies.size(); i++) {
            EntityExchangeResult<byte[]> batched = answers.get(i).get(20, TimeUnit.SECONDS);
            assertThat(batched.getStatus().value()).isEqualTo(200);
            assertSameOutputs(json(batched), json(send(alone, bodies.get(i)).get(20, TimeUnit.SECONDS)));
        }
        assertThat(bert.batchSizes).as("the blocker alone, then the four together").containsExactly(1, 4);
        BatchStatistics.Snapshot counts = batching.statistics().snapshot(MODEL);
        assertThat(counts.executions()).isEqualTo(2);
        assertThat(counts.requests()).isEqualTo(5);
        assertThat(counts.inferences()).as("batch rows: 1 + 3 + 1 + 2 + 1").isEqualTo(8);
        assertThat(counts.tokens()).isEqualTo(4 + 30 + 5 + 34 + 1);
        assertThat(counts.queueDelay().count()).as("every request waited in the queue").isEqualTo(5);
        assertThat(counts.bypassed()).isZero();
        await("all five members answered", () -> batching.statistics().snapshot(MODEL).phases().answers() == 5);
        BatchStatistics.Phases phases = batching.statistics().snapshot(MODEL).phases();
        assertThat(phases.forwards()).as("both batched forwards timed").isEqualTo(2);
        assertThat(phases.meanForwardNanos()).as("the blocker's forward held the stream while the gate was closed")
                .isPositive();
        assertThat(phases.meanEncodeNanos()).isPositive();
    }

    @Test
    void aMalformedRequestIsAnsweredAt400WithoutJoiningTheBatch() throws Exception {
        CompletableFuture<EntityExchangeResult<byte[]>> blocker = block();
        CompletableFuture<EntityExchangeResult<byte[]>> good1 = send(client, body("g1", 1, 1, 6, 0, List.of()));
        CompletableFuture<EntityExchangeResult<byte[]>> good2 = send(client, body("g2", 2, 2, 3, 1, List.of()));
        String outOfVocabulary = "{\"inputs\":[{\"name\":\"input_ids\",\"datatype\":\"INT64\",\"shape\":[1,3],"
                + "\"data\":[2,100,3]}]}";

        // Answered while the stream is still held: it never waited for a batch.
        EntityExchangeResult<byte[]> rejected = send(client, outOfVocabulary).get(20, TimeUnit.SECONDS);
        assertThat(rejected.getStatus().value()).isEqualTo(400);
        assertThat(json(rejected).path("error").asString())
                .contains("model 'tiny-bert' rejected the request").contains("input_ids[0, 1] = 100");

        await("the two good requests wait", () -> batcher.waiting(0) == 2);
        bert.release();
        assertThat(blocker.get(20, TimeUnit.SECONDS).getStatus().value()).isEqualTo(200);
        assertSameOutputs(json(good1.get(20, TimeUnit.SECONDS)),
                json(send(alone, body("g1", 1, 1, 6, 0, List.of())).get(20, TimeUnit.SECONDS)));
        assertSameOutputs(json(good2.get(20, TimeUnit.SECONDS)),
                json(send(alone, body("g2", 2, 2, 3, 1, List.of())).get(20, TimeUnit.SECONDS)));
        assertThat(bert.batchSizes).containsExactly(1, 2);
        assertThat(served.running()).as("requests still counted as running (an unload would wait for them for ever)")
                .isZero();
    }

    @Test
    void aModelBeingUnloadedSaysSoRatherThanThatItIsWarmingUp() throws Exception {
        served.beginUnload();
        EntityExchangeResult<byte[]> refused = send(client, body("u", 1, 1, 5, 0, List.of())).get(20, TimeUnit.SECONDS);
        assertThat(refused.getStatus().value()).isEqualTo(503);
        assertThat(json(refused).path("error").asString()).isEqualTo("model '" + MODEL + "' is being unloaded");
        assertThat(served.running()).isZero();
    }

    @Test
    void aRequestCancelledWhileWaitingLeavesTheBatchAndTheOthersAreAnswered() throws Exception {
        CompletableFuture<EntityExchangeResult<byte[]>> blocker = block();
        CompletableFuture<EncodedResponse> first = batching.infer(validated("1", 1, 1, 5, Duration.ofSeconds(20))).toFuture();
        Disposable cancelled = batching.infer(validated("2", 2, 2, 5, Duration.ofSeconds(20))).subscribe();
        CompletableFuture<EncodedResponse> third = batching.infer(validated("3", 3, 1, 9, Duration.ofSeconds(20))).toFuture();
        await("three wait", () -> batcher.waiting(0) == 3);

        cancelled.dispose();
        assertThat(batcher.waiting(0)).as("the cancelled request left the queue").isEqualTo(2);
        bert.release();

        assertThat(blocker.get(20, TimeUnit.SECONDS).getStatus().value()).isEqualTo(200);
        assertThat(new String(first.get(20, TimeUnit.SECONDS).body())).contains("\"id\":\"1\"");
        assertThat(new String(third.get(20, TimeUnit.SECONDS).body())).contains("\"id\":\"3\"");
        assertThat(bert.batchSizes).containsExactly(1, 2);
        assertThat(batching.statistics().snapshot(MODEL).cancelledWhileWaiting()).isEqualTo(1);
    }

    @Test
    void aRequestWhoseTimeoutPassesWhileWaitingGets504AndTheBatchRunsWithoutIt() throws Exception {
        CompletableFuture<EntityExchangeResult<byte[]>> blocker = block();
        CompletableFuture<EncodedResponse> patient = batching.infer(validated("p", 1, 1, 5, Duration.ofSeconds(20))).toFuture();
        CompletableFuture<EncodedResponse> hasty = batching.infer(validated("h", 2, 1, 5, Duration.ofMillis(50))).toFuture();

        // The stream stays held until the short timeout has fired.
        assertThatThrownBy(() -> hasty.get(20, TimeUnit.SECONDS)).isInstanceOf(ExecutionException.class)
                .cause().isInstanceOfSatisfying(ServingException.class, e -> assertThat(e.status()).isEqualTo(504));
        await("the timed-out request left the queue", () -> batcher.waiting(0) == 1);
        bert.release();

        assertThat(blocker.get(20, TimeUnit.SECONDS).getStatus().value()).isEqualTo(200);
        assertThat(new String(patient.get(20, TimeUnit.SECONDS).body())).contains("\"id\":\"p\"");
        assertThat(bert.batchSizes).containsExactly(1, 1);
    }

    @Test
    void aFailingForwardFailsOnlyTheRequestsInItsBatchWithTheStatusTheyWouldGetAlone() throws Exception {
        CompletableFuture<EntityExchangeResult<byte[]>> blocker = block();
        CompletableFuture<EntityExchangeResult<byte[]>> x = send(client, body("x", 1, 1, 6, 0, List.of()));
        CompletableFuture<EntityExchangeResult<byte[]>> y = send(client, body("y", 2, 1, 8, 0, List.of()));
        await("two wait", () -> batcher.waiting(0) == 2);
        bert.failBatchOfSize = 2;
        bert.failure.set(new OutOfDeviceMemoryException(1 << 20, "planted: out of device memory"));
        bert.release();

        assertThat(blocker.get(20, TimeUnit.SECONDS).getStatus().value()).as("an earlier batch").isEqualTo(200);
        for (CompletableFuture<EntityExchangeResult<byte[]>> failed : List.of(x, y)) {
            EntityExchangeResult<byte[]> answer = failed.get(20, TimeUnit.SECONDS);
            assertThat(answer.getStatus().value()).isEqualTo(507);
            assertThat(json(answer).path("error").asString()).contains("planted");
        }
        EntityExchangeResult<byte[]> later = send(client, body("z", 3, 1, 6, 0, List.of())).get(20, TimeUnit.SECONDS);
        assertThat(later.getStatus().value()).as("a later batch").isEqualTo(200);
        assertThat(bert.batchSizes).containsExactly(1, 2, 1);
    }

    @Test
    void aBatchThatWouldPassThePoolsHeadroomIsSplitNotAnswered507() throws Exception {
        BatchableModel.Member one = bert.prepare(List.of(new HostTensor("input_ids", DataType.INT64, new long[]{2, 16},
                MemorySegment.ofArray(new long[32]))), Set.of());
        long single = bert.batchPeakBytes(List.of(one));
        assertThat(bert.batchPeakBytes(List.of(one, one))).isGreaterThan(single);
        headroom.set(single);
        CompletableFuture<EntityExchangeResult<byte[]>> blocker = block();
        List<CompletableFuture<EntityExchangeResult<byte[]>>> answers = new ArrayList<>();
        for (int i = 0; i < 3; i++) {
            answers.add(send(client, body("s" + i, i, 2, 16, 0, List.of())));
        }
        await("three wait", () -> batcher.waiting(0) == 3);
        bert.release();

        assertThat(blocker.get(20, TimeUnit.SECONDS).getStatus().value()).isEqualTo(200);
        for (int i = 0; i < 3; i++) {
            EntityExchangeResult<byte[]> answer = answers.get(i).get(20, TimeUnit.SECONDS);
            assertThat(answer.getStatus().value()).isEqualTo(200);
            assertSameOutputs(json(answer), json(send(alone, body("s" + i, i, 2, 16, 0, List.of()))
                    .get(20, TimeUnit.SECONDS)));
        }
        assertThat(bert.batchSizes).as("each alone: two together would pass the headroom").containsExactly(1, 1, 1, 1);
        assertThat(batching.statistics().snapshot(MODEL).splitsForMemory()).isEqualTo(2);
    }

    @Test
    void reachingAPreferredBatchSizeDispatchesWithoutWaitingOutTheDelay() throws Exception {
        // A 10 s delay the test would notice (its requests would pass their 5 s timeout) if it were waited out.
        bert.batching = new ModelConfig.Batching(true, 10_000_000L, 32, 4096, List.of(3));
        CompletableFuture<EncodedResponse> two = batching.infer(validated("2", 1, 2, 4, Duration.ofSeconds(5))).toFuture();
        await("the first request waits for company", () -> batcher.waiting(0) == 1);
        CompletableFuture<EncodedResponse> one = batching.infer(validated("1", 2, 1, 4, Duration.ofSeconds(5))).toFuture();

        assertThat(new String(two.get(20, TimeUnit.SECONDS).body())).contains("\"id\":\"2\"");
        assertThat(new String(one.get(20, TimeUnit.SECONDS).body())).contains("\"id\":\"1\"");
        assertThat(bert.batchSizes).as("2 + 1 rows = the preferred size 3").containsExactly(2);
    }

    @Test
    void aLoneRequestIsDispatchedOnceTheDelayHasPassed() throws Exception {
        bert.batching = new ModelConfig.Batching(true, 20_000L, 32, 4096, List.of());
        CompletableFuture<EncodedResponse> lone = batching.infer(validated("lone", 1, 1, 4, Duration.ofSeconds(20))).toFuture();

        assertThat(new String(lone.get(20, TimeUnit.SECONDS).body())).contains("\"id\":\"lone\"");
        assertThat(bert.batchSizes).containsExactly(1);
    }

    @Test
    void aRequestThatFillsTheTokenBudgetAloneRunsAtOnceWhileASmallerOneWaitsOutTheDelay() throws Exception {
        // A 10 s delay: the big request's 5 s timeout would pass if it waited for company.
        bert.batching = new ModelConfig.Batching(true, 10_000_000L, 32, 16, List.of());
        Disposable small = batching.infer(validated("small", 1, 1, 4, Duration.ofSeconds(20))).subscribe();
        await("the small request waits for company", () -> batcher.waiting(0) == 1);

        EncodedResponse big = batching.infer(validated("big", 2, 2, 8, Duration.ofSeconds(5)))
                .block(Duration.ofSeconds(20));

        assertSameOutputs(ServingFixture.JSON.readTree(big.body()),
                json(send(alone, body("big", 2, 2, 8, 0, List.of("pooler_output"))).get(20, TimeUnit.SECONDS)));
        assertThat(batcher.waiting(0)).as("the small request still waits: the big one neither joined nor sent it")
                .isEqualTo(1);
        assertThat(bert.batchSizes).as("never through the batched forward").isEmpty();
        BatchStatistics.Snapshot counts = batching.statistics().snapshot(MODEL);
        assertThat(counts.bypassed()).isEqualTo(1);
        assertThat(counts.executions()).isEqualTo(1);
        assertThat(counts.tokens()).isEqualTo(16);
        assertThat(counts.queueDelay().count()).as("the bypass is no queue delay").isZero();
        small.dispose();
        assertThat(batcher.waiting(0)).isZero();
    }

    @Test
    void withOneRequestPerBatchEveryRequestRunsAtOnceOutsideTheQueue() throws Exception {
        bert.batching = new ModelConfig.Batching(true, 10_000_000L, 1, 4096, List.of());
        for (int i = 0; i < 2; i++) {
            EncodedResponse answer = batching.infer(validated("r" + i, i, 1, 3, Duration.ofSeconds(5)))
                    .block(Duration.ofSeconds(20));
            assertThat(new String(answer.body())).contains("\"id\":\"r" + i + "\"");
        }
        assertThat(bert.batchSizes).isEmpty();
        assertThat(batching.statistics().snapshot(MODEL).bypassed()).isEqualTo(2);
    }

    @Test
    void aModelWithBatchingOffRunsEachRequestAloneAndStillCountsItsExecutions() throws Exception {
        bert.batching = new ModelConfig.Batching(false, null, null, null, List.of());
        EntityExchangeResult<byte[]> answer = send(client, body("off", 1, 2, 4, 0, List.of())).get(20, TimeUnit.SECONDS);

        assertThat(answer.getStatus().value()).isEqualTo(200);
        assertThat(bert.batchSizes).as("never through the batched forward").isEmpty();
        assertThat(batching.statistics().executionCount(MODEL)).isEqualTo(1);
        assertThat(batching.statistics().inferenceCount(MODEL)).isEqualTo(2);
    }

    @Test
    void aBatchWhoseResponseIsStillBeingEncodedDoesNotKeepTheNextBatchOffTheStream() throws Exception {
        BatchQueue queue = batcher.queue(served, 0);
        BatchableModel.Member member = bert.prepare(List.of(new HostTensor("input_ids", DataType.INT64, new long[]{1, 5},
                MemorySegment.ofArray(new long[]{1, 2, 3, 4, 5}))), Set.of("pooler_output"));
        java.util.concurrent.CountDownLatch encoding = new java.util.concurrent.CountDownLatch(1);
        java.util.concurrent.CountDownLatch slowEntered = new java.util.concurrent.CountDownLatch(1);
        CompletableFuture<String> slow = queue.submit(member, () -> { }, outputs -> {
            slowEntered.countDown();
            try {
                return encoding.await(30, TimeUnit.SECONDS) ? "slow" : "gate never opened";
            } catch (InterruptedException e) {
                throw new IllegalStateException(e);
            }
        }).toFuture();
        assertThat(slowEntered.await(20, TimeUnit.SECONDS)).as("the first batch ran and its encoding began").isTrue();

        // The device has one stream and one worker thread: the second batch runs only if the first one's
        // encoding gave both back.
        String quick = queue.submit(member, () -> { }, outputs -> "quick").block(Duration.ofSeconds(20));

        assertThat(quick).isEqualTo("quick");
        assertThat(slow).as("still encoding").isNotDone();
        assertThat(served.statistics().executionCount()).as("both forwards counted once they ran").isEqualTo(2);
        encoding.countDown();
        assertThat(slow.get(20, TimeUnit.SECONDS)).isEqualTo("slow");
        assertThat(bert.batchSizes).containsExactly(1, 1);
        await("the slow member's encoding is counted", () -> served.statistics().computeOutput().count() == 2);
    }

    @Test
    void withOneBatchInFlightPerDeviceRequestsGatherWhileABatchRunsThoughAStreamIsIdle() throws Exception {
        DeviceWorker twoStreams = new DeviceWorker(device, activations, ops, 2, 16);
        List<DeviceRuntime> runtimes = List.of(new DeviceRuntime(device, activations, weights, ops, twoStreams));
        DynamicBatcher oneAtATime = new DynamicBatcher(runtimes, BatchPolicy.Defaults.off(), 16, Map.of(),
                new BatchStatistics(), null, 1);
        InferenceService service = new InferenceService(runtimes, ServingFixture.JSON, InferenceObserver.NONE,
                oneAtATime);
        try {
            bert.hold();
            CompletableFuture<EncodedResponse> first = service.infer(validated("1", 1, 1, 5, Duration.ofSeconds(20)))
                    .toFuture();
            await("the first batch holds a stream", () -> bert.entered.get() == 1);
            CompletableFuture<EncodedResponse> second = service.infer(validated("2", 2, 2, 5, Duration.ofSeconds(20)))
                    .toFuture();
            CompletableFuture<EncodedResponse> third = service.infer(validated("3", 3, 1, 7, Duration.ofSeconds(20)))
                    .toFuture();
            await("two wait for the running batch", () -> oneAtATime.waiting(0) == 2);
            assertThat(twoStreams.inFlight()).as("the second stream stays idle").isEqualTo(1);

            bert.release();
            for (var answer : List.of(first, second, third)) {
                assertThat(new String(answer.get(20, TimeUnit.SECONDS).body())).contains("\"outputs\"");
            }
            assertThat(bert.batchSizes).as("the first alone, then the two that gathered").containsExactly(1, 2);
        } finally {
            oneAtATime.close();
            twoStreams.close();
        }
    }

    @Test
    void aNegativeNumberOfBatchesPerDeviceIsRefusedNamingIt() {
        assertThatThrownBy(() -> new DynamicBatcher(List.of(), BatchPolicy.Defaults.off(), 16, Map.of(),
                new BatchStatistics(), null, -1)).isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("batches per device = -1");
    }
}
