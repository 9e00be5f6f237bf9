package io.gpupool.serving;

import io.gpupool.serving.fake.TestModel;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.springframework.core.io.buffer.DataBuffer;
import org.springframework.core.io.buffer.DefaultDataBufferFactory;
import org.springframework.http.MediaType;
import org.springframework.web.reactive.function.BodyInserters;
import reactor.core.publisher.Sinks;
import org.springframework.test.web.reactive.server.WebTestClient;

import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.hamcrest.Matchers.containsString;

/** Triton's model repository extension: load and unload at run time, and who may call them. */
class RepositoryExtensionTest {

    private static final String ONE_ROW = """
            {"inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP32", "data": [1, 2, 3, 4]}]}""";

    private ServingFixture fixture;

    @AfterEach
    void close() {
        if (fixture != null) {
            fixture.close();
        }
    }

    private static void expectError(WebTestClient.ResponseSpec response, int status, String messagePart) {
        response.expectStatus().isEqualTo(status).expectBody().jsonPath("$.error").value(containsString(messagePart));
    }

    private WebTestClient.ResponseSpec post(String uri) {
        return fixture.client.post().uri(uri).exchange();
    }

    private WebTestClient.ResponseSpec infer(String model) {
        return fixture.client.post().uri("/v2/models/" + model + "/infer").contentType(MediaType.APPLICATION_JSON)
                .bodyValue(ONE_ROW).exchange();
    }

    @Test
    void offUnlessModelControlIsExplicit() {
        fixture = ServingFixture.builder().build();
        expectError(post("/v2/repository/models/late/load"), 403, "gpupool.models.control=explicit");
        expectError(post("/v2/repository/models/doubler/unload"), 403, "gpupool.models.control=explicit");
        infer("doubler").expectStatus().isOk();
    }

    @Test
    void loadServesANewModelAfterItsDryRun() {
        fixture = ServingFixture.builder().modelControl().build();
        expectError(infer("late"), 404, "unknown model 'late'");
        post("/v2/repository/models/late/load").expectStatus().isOk();
        assertThat(fixture.model("late").invocations).as("the dry run").hasValue(1);
        infer("late").expectStatus().isOk().expectBody().jsonPath("$.outputs[0].data[3]").isEqualTo(8.0);
        fixture.client.post().uri("/v2/repository/index").exchange().expectBody()
                .jsonPath("$[?(@.name=='late')].state").isEqualTo("READY");
        assertThat(fixture.loadedModels).containsExactly("late");
    }

    @Test
    void unloadDrainsRunningRequestsThenFreesTheModel() throws Exception {
        fixture = ServingFixture.builder().modelControl().build();
        TestModel doubler = fixture.model("doubler");
        CountDownLatch entered = new CountDownLatch(1);
        CountDownLatch release = new CountDownLatch(1);
        holdRuns(doubler, entered, release);
        WebTestClient patient = fixture.client.mutate().responseTimeout(Duration.ofSeconds(20)).build();
        ExecutorService clients = Executors.newFixedThreadPool(2);
        CompletableFuture<Integer> running = inferStatus(patient, clients);
        assertThat(entered.await(10, TimeUnit.SECONDS)).isTrue();
        CompletableFuture<Integer> unload = CompletableFuture.supplyAsync(() -> patient.post()
                .uri("/v2/repository/models/doubler/unload").exchange().returnResult(String.class).getStatus().value(),
                clients);
        ServedModel served = fixture.registry.served("doubler");
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (!served.isUnloading() && System.nanoTime() < deadline) {
            Thread.sleep(5);                                    // the unload has begun
        }
        Thread.sleep(50);
        assertThat(unload).as("unload waits for the running request").isNotDone();
        assertThat(doubler.closed).isFalse();
        fixture.client.get().uri("/v2/models/doubler/ready").exchange().expectStatus().isEqualTo(503);
        release.countDown();
        assertThat(running.get(10, TimeUnit.SECONDS)).as("the running request finished").isEqualTo(200);
        assertThat(unload.get(10, TimeUnit.SECONDS)).isEqualTo(200);
        clients.shutdown();
        assertThat(doubler.closed).as("replicas closed after the drain").isTrue();
        expectError(infer("doubler"), 404, "model 'doubler' is not loaded: it was unloaded on request");
        fixture.client.get().uri("/v2/models/doubler").exchange().expectStatus().isNotFound().expectBody()
                .jsonPath("$.error").value(error -> assertThat(error.toString()).doesNotContain("failed to load"));
        fixture.client.post().uri("/v2/repository/index").exchange().expectBody()
                .jsonPath("$[?(@.name=='doubler')].state").isEqualTo("UNAVAILABLE")
                .jsonPath("$[?(@.name=='doubler')].reason").value(reason -> assertThat(reason.toString())
                        .contains("unloaded on request"));
        assertThat(fixture.allocatedBytes()).isZero();
        // and back
        post("/v2/repository/models/doubler/load").expectStatus().isOk();
        infer("doubler").expectStatus().isOk();
    }

    @Test
    void loadingALoadedModelReplacesIt() {
        fixture = ServingFixture.builder().modelControl().build();
        TestModel before = fixture.model("doubler");
        post("/v2/repository/models/doubler/load").expectStatus().isOk();
        assertThat(before.closed).isTrue();
        assertThat(fixture.model("doubler")).isNotSameAs(before);
        infer("doubler").expectStatus().isOk();
    }

    @Test
    void aRequestWhoseBodyIsArrivingWhileItsModelIsReloadedRunsOnTheNewModel() throws Exception {
        fixture = ServingFixture.builder().modelControl().build();
        TestModel before = fixture.model("doubler");
        ExecutorService clients = Executors.newFixedThreadPool(1);
        try {
            Sinks.Many<DataBuffer> parts = Sinks.many().unicast().onBackpressureBuffer();
            CompletableFuture<WebTestClient.ResponseSpec> answer = CompletableFuture.supplyAsync(() -> fixture.client
                    .post().uri("/v2/models/doubler/infer").contentType(MediaType.APPLICATION_JSON)
                    .body(BodyInserters.fromDataBuffers(parts.asFlux())).exchange(), clients);
            parts.tryEmitNext(bytes(ONE_ROW.substring(0, 20)));
            Thread.sleep(100);                                  // the request has found the model it was sent to
            post("/v2/repository/models/doubler/load").expectStatus().isOk();
            assertThat(before.closed).as("the old model was replaced").isTrue();
            int warmUp = fixture.model("doubler").invocations.get();
            parts.tryEmitNext(bytes(ONE_ROW.substring(20)));
            parts.tryEmitComplete();
            answer.get(10, TimeUnit.SECONDS).expectStatus().isOk()
                    .expectBody().jsonPath("$.outputs[0].data[3]").isEqualTo(8.0);
            assertThat(fixture.model("doubler").invocations).as("run by the new model").hasValue(warmUp + 1);
            assertThat(before.invocations).as("not by the old one").hasValue(0);
        } finally {
            clients.shutdownNow();
        }
    }

    /**
     * A request that found the model before a reload and waits for a stream until the old model drains is run by the
     * new one. The reload's steps are taken here as RepositoryHandler takes them (serve the new model, then begin
     * the old one's unload), without its dry run, which would need the stream the first request holds.
     */
    @Test
    void aRequestWaitingForAStreamWhileItsModelIsReloadedRunsOnTheNewModel() throws Exception {
        fixture = ServingFixture.builder().modelControl().streams(1).build();
        TestModel before = fixture.model("doubler");
        ServedModel old = fixture.registry.served("doubler");
        CountDownLatch entered = new CountDownLatch(1);
        CountDownLatch release = new CountDownLatch(1);
        holdRuns(before, entered, release);
        WebTestClient patient = fixture.client.mutate().responseTimeout(Duration.ofSeconds(20)).build();
        ExecutorService clients = Executors.newFixedThreadPool(2);
        try {
            CompletableFuture<Integer> running = inferStatus(patient, clients);
            assertThat(entered.await(10, TimeUnit.SECONDS)).isTrue();
            CompletableFuture<Integer> waiting = inferStatus(patient, clients);
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
            while (fixture.runtimes.getFirst().worker().queueDepth() == 0 && System.nanoTime() < deadline) {
                Thread.sleep(5);                                // the second request waits for the only stream
            }
            ServedModel fresh = fixture.reloaded("doubler");
            fresh.markReady();
            assertThat(fixture.registry.serve(fresh)).isSameAs(old);
            old.beginUnload();
            release.countDown();
            assertThat(running.get(10, TimeUnit.SECONDS)).as("the running request finished on the old model").isEqualTo(200);
            assertThat(waiting.get(10, TimeUnit.SECONDS)).as("the waiting one ran on the new model").isEqualTo(200);
            assertThat(before.invocations).as("the running request only").hasValue(1);
            assertThat(fixture.model("doubler").invocations).as("the new model ran the waiting one").hasValue(1);
            assertThat(fixture.allocatedBytes()).isZero();
        } finally {
            release.countDown();
            clients.shutdownNow();
        }
    }

    /**
     * The run on the new model gets what is left of the request's timeout, not a fresh one: a client that asked for
     * an answer within 2 s gets its 504 after about 2 s even though most of them passed waiting on the old model.
     */
    @Test
    void aRequestRunAgainOnTheNewModelKeepsItsOriginalDeadline() throws Exception {
        fixture = ServingFixture.builder().modelControl().streams(1).build();
        ServedModel old = fixture.registry.served("doubler");
        CountDownLatch entered = new CountDownLatch(1);
        CountDownLatch release = new CountDownLatch(1);
        holdRuns(fixture.model("doubler"), entered, release);
        WebTestClient patient = fixture.client.mutate().responseTimeout(Duration.ofSeconds(20)).build();
        ExecutorService clients = Executors.newFixedThreadPool(2);
        CountDownLatch releaseNew = new CountDownLatch(1);
        try {
            CompletableFuture<Integer> running = inferStatus(patient, clients);
            assertThat(entered.await(10, TimeUnit.SECONDS)).isTrue();
            long sent = System.nanoTime();
            String twoSeconds = ONE_ROW.replace("{\"inputs\"", "{\"parameters\": {\"timeout\": 2000000}, \"inputs\"");
            CompletableFuture<String> waiting = CompletableFuture.supplyAsync(() -> patient.post()
                    .uri("/v2/models/doubler/infer").contentType(MediaType.APPLICATION_JSON).bodyValue(twoSeconds)
                    .exchange().returnResult(String.class).getResponseBody().blockFirst(), clients);
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
            while (fixture.runtimes.getFirst().worker().queueDepth() == 0 && System.nanoTime() < deadline) {
                Thread.sleep(5);                                // the second request waits for the only stream
            }
            ServedModel fresh = fixture.reloaded("doubler");
            fresh.markReady();
            holdRuns(fixture.model("doubler"), new CountDownLatch(1), releaseNew);   // the new model never answers
            fixture.registry.serve(fresh);
            old.beginUnload();
            Thread.sleep(1_500);                                // most of the 2 s pass on the old model
            release.countDown();
            assertThat(running.get(10, TimeUnit.SECONDS)).isEqualTo(200);
            String answer = waiting.get(10, TimeUnit.SECONDS);
            long elapsedMillis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - sent);
            assertThat(answer).contains("within its timeout of 2000000 µs");
            assertThat(elapsedMillis).as("answered at its 2 s deadline, not 2 s after the run on the new model began")
                    .isLessThan(3_000);
        } finally {
            release.countDown();
            releaseNew.countDown();
            clients.shutdownNow();
        }
    }

    /** Makes {@code model}'s runs count down {@code entered} and then wait for {@code release} (10 s at most). */
    private static void holdRuns(TestModel model, CountDownLatch entered, CountDownLatch release) {
        model.gate = () -> {
            entered.countDown();
            try {
                release.await(10, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        };
    }

    /** The status of one inference of {@link #ONE_ROW} on doubler, sent by {@code client} on a thread of {@code clients}. */
    private static CompletableFuture<Integer> inferStatus(WebTestClient client, ExecutorService clients) {
        return CompletableFuture.supplyAsync(() -> client.post().uri("/v2/models/doubler/infer")
                .contentType(MediaType.APPLICATION_JSON).bodyValue(ONE_ROW)
                .exchange().returnResult(String.class).getStatus().value(), clients);
    }

    private static DataBuffer bytes(String text) {
        return DefaultDataBufferFactory.sharedInstance.wrap(text.getBytes(java.nio.charset.StandardCharsets.UTF_8));
    }

    @Test
    void aModelThatFailsLeavesNothingBehindAndNamesWhy() {
        fixture = ServingFixture.builder().modelControl().build();
        expectError(post("/v2/repository/models/unfit/load"), 400, "failed its warm-up and is not served: kernel missing");
        assertThat(fixture.model("unfit").closed).isTrue();
        expectError(infer("unfit"), 404, "unknown model 'unfit' (it failed to load: its warm-up failed: kernel missing)");
        fixture.client.post().uri("/v2/repository/index").exchange().expectBody()
                .jsonPath("$[?(@.name=='unfit')].state").isEqualTo("UNAVAILABLE")
                .jsonPath("$[?(@.name=='unfit')].reason").value(reason -> assertThat(reason.toString())
                        .contains("kernel missing"));
        expectError(post("/v2/repository/models/broken/load"), 400, "model 'broken' failed to load: config.json");
        fixture.client.post().uri("/v2/repository/index").exchange().expectBody()
                .jsonPath("$[?(@.name=='broken')].reason").isEqualTo(List.of("config.json: not valid JSON"));
        expectError(post("/v2/repository/models/nowhere/load"), 404, "no model folder 'nowhere'");
        fixture.client.post().uri("/v2/repository/index").exchange().expectBody()
                .jsonPath("$[?(@.name=='nowhere')]").isEmpty();
        post("/v2/repository/models/unfit/load").expectStatus().isBadRequest();
        fixture.client.post().uri("/v2/repository/index").exchange().expectBody()
                .jsonPath("$[?(@.name=='unfit')].name").value(names -> assertThat((List<?>) names)
                        .as("listed once after a second failed load").hasSize(1));
        expectError(post("/v2/repository/models/nowhere/load"), 404, "no model folder 'nowhere'");
        expectError(fixture.client.post().uri("/v2/repository/models/{m}/load", "..").exchange(), 400,
                "invalid model name");
        expectError(post("/v2/repository/models/nowhere/unload"), 404, "unknown model 'nowhere'");
        expectError(fixture.client.post().uri("/v2/repository/models/late/load").contentType(MediaType.APPLICATION_JSON)
                .bodyValue("{\"parameters\": {\"config\": \"{}\"}}").exchange(), 400, "parameter 'config' is not supported");
        expectError(fixture.client.post().uri("/v2/repository/models/late/load").contentType(MediaType.APPLICATION_JSON)
                .bodyValue("[1, 2]").exchange(), 400, "a repository request body must be one JSON object");
        expectError(fixture.client.post().uri("/v2/repository/models/late/load").contentType(MediaType.APPLICATION_JSON)
                .bodyValue("{\"parameters\": [1]}").exchange(), 400,
                "'parameters' of a repository request must be a JSON object, not array");
        expectError(fixture.client.post().uri("/v2/repository/models/late/load").contentType(MediaType.APPLICATION_JSON)
                .bodyValue("{\"parameters\": {}, \"parameters\": {}}").exchange(), 400,
                "malformed repository request JSON: Duplicate Object property \"parameters\"");
        assertThat(fixture.loadedModels).isEmpty();
        assertThat(fixture.allocatedBytes()).isZero();
    }
}
