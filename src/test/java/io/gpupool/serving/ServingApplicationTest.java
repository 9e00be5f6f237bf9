package io.gpupool.serving;

import io.gpupool.WebTestClients;

import io.gpupool.GpuPoolApplication;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.context.TypeExcludeFilter;
import org.springframework.boot.context.properties.ConfigurationPropertiesScan;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.web.server.LocalManagementPort;
import org.springframework.context.annotation.ComponentScan;
import org.springframework.context.annotation.FilterType;
import org.springframework.boot.webtestclient.autoconfigure.AutoConfigureWebTestClient;
import org.springframework.http.MediaType;
import org.springframework.test.web.reactive.server.WebTestClient;

import java.time.Duration;
import java.util.Map;

import static org.assertj.core.api.Assertions.assertThat;

/** The whole application on the host backend with the shipped example models (models/). */
@SpringBootTest(classes = ServingApplicationTest.Application.class,
        webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT, properties = {"gpupool.backend=host", "gpupool.serving.max-batch-size=16",
        "management.server.port=0"})
@AutoConfigureWebTestClient
class ServingApplicationTest {

    /**
     * {@link GpuPoolApplication} as it ships, except that other test suites' own Spring Boot
     * configurations under src/test (e.g. the operations layer alone) are not scanned in.
     */
    @SpringBootConfiguration
    @EnableAutoConfiguration
    @ConfigurationPropertiesScan(basePackageClasses = GpuPoolApplication.class)
    @ComponentScan(basePackageClasses = GpuPoolApplication.class, excludeFilters = {
            @ComponentScan.Filter(type = FilterType.CUSTOM, classes = TypeExcludeFilter.class),
            @ComponentScan.Filter(type = FilterType.ANNOTATION, classes = SpringBootConfiguration.class)})
    static class Application {
    }

    @Autowired
    WebTestClient client;

    @Autowired
    ModelRegistry registry;

    @LocalManagementPort
    int managementPort;

    @BeforeEach
    void waitForWarmUp() {
        long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
        while (!registry.isWarmedUp()) {
            assertThat(System.nanoTime()).as("warm-up finished within 60 s").isLessThan(deadline);
            sleepBriefly();
        }
    }

    @Test
    void readyAfterWarmUpWithBothExampleModels() {
        client.get().uri("/v2/health/ready").exchange().expectStatus().isOk();
        client.post().uri("/v2/repository/index").exchange().expectStatus().isOk().expectBody()
                .jsonPath("$[?(@.name=='iris-mlp')].state").isEqualTo("READY")
                .jsonPath("$[?(@.name=='tiny-bert')].state").isEqualTo("READY");
    }

    @Test
    void irisMlpClassifiesASetosa() {
        client.post().uri("/v2/models/iris-mlp/infer").contentType(MediaType.APPLICATION_JSON)
                .bodyValue("""
                        {"id": "flower-1", "inputs": [{"name": "input", "shape": [1, 4], "datatype": "FP32",
                          "data": [5.1, 3.5, 1.4, 0.2]}], "outputs": [{"name": "label"}]}""")
                .exchange().expectStatus().isOk().expectBody()
                .jsonPath("$.id").isEqualTo("flower-1")
                .jsonPath("$.outputs[0].name").isEqualTo("label")
                .jsonPath("$.outputs[0].datatype").isEqualTo("INT64")
                .jsonPath("$.outputs[0].data[0]").isEqualTo(0);
    }

    @Test
    void irisMlpClassificationNamesEachFlowersClassesMostLikelyFirst() {
        client.post().uri("/v2/models/iris-mlp/infer").contentType(MediaType.APPLICATION_JSON)
                .bodyValue("""
                        {"inputs": [{"name": "input", "shape": [2, 4], "datatype": "FP32",
                          "data": [5.1, 3.5, 1.4, 0.2, 6.3, 3.3, 6.0, 2.5]}],
                         "outputs": [{"name": "probabilities", "parameters": {"classification": 2}}]}""")
                .exchange().expectStatus().isOk().expectBody()
                .jsonPath("$.outputs[0].datatype").isEqualTo("BYTES")
                .jsonPath("$.outputs[0].shape").isEqualTo(java.util.List.of(2, 2))
                .jsonPath("$.outputs[0].data[0]").value(org.hamcrest.Matchers.endsWith(":0:setosa"))
                .jsonPath("$.outputs[0].data[2]").value(org.hamcrest.Matchers.endsWith(":2:virginica"))
                .jsonPath("$.outputs[0].data[0]").value((String first) ->
                        assertThat(Float.parseFloat(first.split(":")[0])).isBetween(0.5f, 1f));
    }

    @Test
    void tinyBertPoolsEachSequence() {
        client.get().uri("/v2/models/tiny-bert").exchange().expectStatus().isOk().expectBody()
                .jsonPath("$.inputs[0].name").isEqualTo("input_ids")
                .jsonPath("$.inputs[0].shape[1]").isEqualTo(-1);
        client.post().uri("/v2/models/tiny-bert/versions/1/infer").contentType(MediaType.APPLICATION_JSON)
                .bodyValue("""
                        {"inputs": [
                          {"name": "input_ids", "shape": [2, 4], "datatype": "INT64", "data": [[2, 7, 9, 3], [2, 5, 3, 0]]},
                          {"name": "attention_mask", "shape": [2, 4], "datatype": "INT64", "data": [[1, 1, 1, 1], [1, 1, 1, 0]]}],
                         "outputs": [{"name": "pooler_output"}]}""")
                .exchange().expectStatus().isOk().expectBody()
                .jsonPath("$.outputs[0].name").isEqualTo("pooler_output")
                .jsonPath("$.outputs[0].shape[0]").isEqualTo(2)
                .jsonPath("$.outputs[0].shape[1]").isEqualTo(32)
                .jsonPath("$.outputs[0].data.length()").isEqualTo(64);
    }

    @Test
    void aBatchingModelsConfigurationShowsItsDynamicBatching() {
        client.get().uri("/v2/models/iris-mlp/config").exchange().expectStatus().isOk().expectBody()
                .jsonPath("$.dynamic_batching.max_queue_delay_microseconds").isEqualTo(100)
                .jsonPath("$.dynamic_batching.max_batch_requests").isEqualTo(64)
                .jsonPath("$.dynamic_batching.max_batch_tokens").isEqualTo(1024);
    }

    @Test
    void theShippedTinyBertOffersTheEmbeddingTheReadmeShows() {
        client.get().uri("/v2/models/tiny-bert").exchange().expectStatus().isOk().expectBody()
                .jsonPath("$.outputs[*].name").value(names -> assertThat(names.toString()).contains("embedding"));
        client.post().uri("/v2/models/tiny-bert/infer").contentType(MediaType.APPLICATION_JSON)
                .bodyValue("""
                        {"inputs": [{"name": "input_ids", "shape": [2, 3], "datatype": "INT64", "data": [[2, 45, 3], [2, 17, 3]]}],
                         "outputs": [{"name": "embedding"}]}""")
                .exchange().expectStatus().isOk().expectBody()
                .jsonPath("$.outputs[0].name").isEqualTo("embedding")
                .jsonPath("$.outputs[0].shape[0]").isEqualTo(2)
                .jsonPath("$.outputs[0].shape[1]").isEqualTo(32);
    }

    @Test
    void irisMlpWithBinaryTensorDataBothWays() {
        byte[] header = ("{\"inputs\":[{\"name\":\"input\",\"datatype\":\"FP32\",\"shape\":[2,4],"
                + "\"parameters\":{\"binary_data_size\":32}}],\"parameters\":{\"binary_data_output\":true}}")
                .getBytes(java.nio.charset.StandardCharsets.UTF_8);
        java.nio.ByteBuffer body = java.nio.ByteBuffer.allocate(header.length + 32).order(java.nio.ByteOrder.LITTLE_ENDIAN);
        body.put(header);
        for (float v : new float[]{5.1f, 3.5f, 1.4f, 0.2f, 6.7f, 3.0f, 5.2f, 2.3f}) {
            body.putFloat(v);
        }
        var result = client.post().uri("/v2/models/iris-mlp/infer").contentType(MediaType.APPLICATION_OCTET_STREAM)
                .header(InferenceHandler.HEADER_LENGTH, Integer.toString(header.length)).bodyValue(body.array())
                .exchange().expectStatus().isOk().expectHeader().contentType(MediaType.APPLICATION_OCTET_STREAM)
                .expectBody(byte[].class).returnResult();
        int jsonLength = Integer.parseInt(result.getResponseHeaders().getFirst(InferenceHandler.HEADER_LENGTH));
        byte[] response = result.getResponseBody();
        // probabilities [2, 3] FP32 (24 bytes) then label [2] INT64 (16 bytes), in the order of the outputs
        assertThat(response.length - jsonLength).isEqualTo(24 + 16);
        java.nio.ByteBuffer labels = java.nio.ByteBuffer.wrap(response, jsonLength + 24, 16)
                .order(java.nio.ByteOrder.LITTLE_ENDIAN);
        assertThat(new long[]{labels.getLong(), labels.getLong()}).containsExactly(0L, 2L);
    }

    @Test
    void tokenOutsideTheVocabularyIs400() {
        client.post().uri("/v2/models/tiny-bert/infer").contentType(MediaType.APPLICATION_JSON)
                .bodyValue("""
                        {"inputs": [{"name": "input_ids", "shape": [1, 2], "datatype": "INT64", "data": [5, 100000]}]}""")
                .exchange().expectStatus().isBadRequest().expectBody().jsonPath("$.error").exists();
    }

    @Test
    void sequenceAboveTheModelMaximumIs400BeforeAnyWork() {
        client.post().uri("/v2/models/tiny-bert/infer").contentType(MediaType.APPLICATION_JSON)
                .bodyValue("{\"inputs\": [{\"name\": \"input_ids\", \"shape\": [1, 65], \"datatype\": \"INT64\", \"data\": ["
                        + "1,".repeat(64) + "1]}]}")
                .exchange().expectStatus().isBadRequest().expectBody().jsonPath("$.error")
                .isEqualTo("input 'input_ids': sequence length 65 is outside 1..64 (model 'tiny-bert' allows 64, "
                        + "gpupool.serving.max-sequence-length=512)");
    }

    /** Polling pause: the build machine has two shared cores, so waiting must not spin. */
    @Autowired
    DynamicBatcher batcher;

    @Autowired
    io.micrometer.core.instrument.MeterRegistry meters;

    @Test
    void theShippedModelsBatchAndCountTheirExecutionsInTheMeters() {
        client.post().uri("/v2/models/iris-mlp/infer").contentType(MediaType.APPLICATION_JSON)
                .bodyValue("""
                        {"inputs": [{"name": "input", "shape": [2, 4], "datatype": "FP32",
                          "data": [5.1, 3.5, 1.4, 0.2, 6.7, 3.0, 5.2, 2.3]}], "outputs": [{"name": "label"}]}""")
                .exchange().expectStatus().isOk().expectBody().jsonPath("$.outputs[0].data[1]").isEqualTo(2);

        assertThat(batcher.describe()).anySatisfy(d -> {
            assertThat(d.model()).isEqualTo("iris-mlp");
            assertThat(d.layout()).isEqualTo("packed");
            assertThat(d.policy().maxRequests()).as("models/iris-mlp/config.json").isEqualTo(64);
            assertThat(d.batchesInFlight()).as("gpupool.batching.max-batches-in-flight, of 4 streams").isEqualTo(2);
        });
        assertThat(batcher.statistics().executionCount("iris-mlp")).isPositive();
        assertThat(batcher.statistics().inferenceCount("iris-mlp")).isGreaterThanOrEqualTo(2);
        assertThat(meters.get("gpupool.batch.executions").tag("model", "iris-mlp").counter().count()).isPositive();
        assertThat(meters.get("gpupool.batch.tokens").tag("model", "iris-mlp").summary().count()).isPositive();
    }

    @Test
    void theHttpMetricsNameTheMatchedRoutesPatternNotTheModel() {
        client.post().uri("/v2/models/iris-mlp/infer").contentType(MediaType.APPLICATION_JSON)
                .bodyValue("""
                        {"inputs": [{"name": "input", "shape": [1, 4], "datatype": "FP32",
                          "data": [5.1, 3.5, 1.4, 0.2]}]}""")
                .exchange().expectStatus().isOk();

        long deadline = System.nanoTime() + Duration.ofSeconds(20).toNanos();
        while (meters.find("http.server.requests").tag("uri", "/v2/models/{model}/infer").timer() == null) {
            assertThat(System.nanoTime()).as("the inference request is timed under its route's pattern")
                    .isLessThan(deadline);
            sleepBriefly();
        }
        assertThat(meters.find("http.server.requests").tag("uri", "/v2/models/iris-mlp/infer").timer())
                .as("one series per route, not per model").isNull();
    }

    @Test
    void theGpupoolEndpointShowsEachBatchingModelsPolicyQueueAndCounters() {
        client.post().uri("/v2/models/iris-mlp/infer").contentType(MediaType.APPLICATION_JSON)
                .bodyValue("""
                        {"inputs": [{"name": "input", "shape": [3, 4], "datatype": "FP32",
                          "data": [5.1, 3.5, 1.4, 0.2, 6.7, 3.0, 5.2, 2.3, 5.9, 3.0, 4.2, 1.5]}]}""")
                .exchange().expectStatus().isOk();

        WebTestClients.to("http://localhost:" + managementPort + "/actuator")
                .get().uri("/gpupool").exchange().expectStatus().isOk().expectBody()
                .jsonPath("$.batching['iris-mlp'].layout").isEqualTo("packed")
                .jsonPath("$.batching['iris-mlp'].maxRequests").isEqualTo(64)              // models/iris-mlp/config.json
                .jsonPath("$.batching['iris-mlp'].maxQueueDelayMicros").isEqualTo(100)
                .jsonPath("$.batching['iris-mlp'].waiting").isEqualTo(0)                   // nothing waits once answered
                .jsonPath("$.batching['iris-mlp'].executions").value(Number.class,
                        n -> assertThat(n.longValue()).isPositive())
                .jsonPath("$.batching['iris-mlp'].inferences").value(Number.class,
                        n -> assertThat(n.longValue()).isGreaterThanOrEqualTo(3))
                .jsonPath("$.batching['iris-mlp'].meanRowsPerExecution").value(Number.class,
                        n -> assertThat(n.doubleValue()).isGreaterThanOrEqualTo(1.0))
                .jsonPath("$.batching['iris-mlp'].queueDelay.samples").value(Number.class,
                        n -> assertThat(n.longValue()).as("3 rows < max_batch_tokens: queued").isPositive())
                .jsonPath("$.batching['iris-mlp'].phases.forwards").value(Number.class,
                        n -> assertThat(n.longValue()).isPositive())
                .jsonPath("$.batching['tiny-bert'].maxTokens").isEqualTo(4096)             // listed before any request
                .jsonPath("$.batching['tiny-bert'].bypassed").isEqualTo(0);
    }

    @Test
    void theInferenceApiAnswersWithoutCredentialsWhileTheOperatorsEndpointsStillNeedThem() {
        client.post().uri("/v2/models/iris-mlp/infer").contentType(MediaType.APPLICATION_JSON)
                .bodyValue("""
                        {"inputs": [{"name": "input", "shape": [1, 4], "datatype": "FP32",
                          "data": [5.1, 3.5, 1.4, 0.2]}]}""")
                .exchange().expectStatus().isOk()
                .expectHeader().valueEquals("X-Content-Type-Options", "nosniff")   // the security headers stay
                .expectHeader().doesNotExist("Set-Cookie");                         // stateless: no session
        client.get().uri("/v2").exchange().expectStatus().isOk();

        WebTestClient management = WebTestClients.to("http://localhost:" + managementPort);
        management.delete().uri("/actuator/gpupool").exchange().expectStatus().isUnauthorized();
        management.post().uri("/actuator/gpupool").contentType(MediaType.APPLICATION_JSON)
                .bodyValue(Map.of("recording", true)).exchange().expectStatus().isUnauthorized();
        management.get().uri("/actuator/gpupool/host:0/trace").exchange().expectStatus().isUnauthorized();
        management.get().uri("/actuator/env").exchange().expectStatus().isUnauthorized();
        // the inference chain does not apply on the management port: there only endpoints are served
        management.get().uri("/v2/health/ready").exchange().expectStatus().isUnauthorized();
        management.get().uri("/actuator/health").exchange().expectStatus().isOk();
    }

    @Test
    void springSecurityObservesTheActuatorsChainButNotTheOpenInferenceApi() {
        long before = securedRequestsObserved();
        for (int i = 0; i < 3; i++) {
            client.get().uri("/v2/health/ready").exchange().expectStatus().isOk();
        }
        WebTestClients.to("http://localhost:" + managementPort)
                .get().uri("/actuator/health").exchange().expectStatus().isOk();

        long deadline = System.nanoTime() + Duration.ofSeconds(20).toNanos();
        while (securedRequestsObserved() == before) {
            assertThat(System.nanoTime()).as("the actuator's request is observed").isLessThan(deadline);
            sleepBriefly();
        }
        assertThat(securedRequestsObserved()).as("only the actuator's request, none of the inference API's")
                .isEqualTo(before + 1);
        assertThat(meters.find("http.server.requests").tag("uri", "/v2/health/ready").timer())
                .as("the inference API's requests are still timed").isNotNull()
                .satisfies(timer -> assertThat(timer.count()).isGreaterThanOrEqualTo(3));
    }

    private long securedRequestsObserved() {
        return meters.find("spring.security.http.secured.requests").timers().stream().mapToLong(t -> t.count()).sum();
    }

    static void sleepBriefly() {
        try {
            Thread.sleep(20);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException(e);
        }
    }
}
