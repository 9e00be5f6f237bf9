package io.gpupool.serving;

import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.webtestclient.autoconfigure.AutoConfigureWebTestClient;
import org.springframework.http.MediaType;
import org.springframework.test.web.reactive.server.WebTestClient;

import java.time.Duration;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * {@code gpupool.models.control=explicit} on the real application: unloading a model gives its
 * weights' device memory back, loading it again serves it as before.
 */
@SpringBootTest(classes = ServingApplicationTest.Application.class,
        webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT,
        properties = {"gpupool.backend=host", "gpupool.models.control=explicit"})
@AutoConfigureWebTestClient
class ModelControlApplicationTest {

    private static final String SETOSA = """
            {"inputs": [{"name": "input", "shape": [1, 4], "datatype": "FP32", "data": [5.1, 3.5, 1.4, 0.2]}],
             "outputs": [{"name": "label"}]}""";

    @Autowired
    WebTestClient client;

    @Autowired
    ModelRegistry registry;

    @Autowired
    ServingDevices devices;

    @BeforeEach
    void waitForWarmUp() {
        long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
        while (!registry.isWarmedUp()) {
            assertThat(System.nanoTime()).as("warm-up finished within 60 s").isLessThan(deadline);
            ServingApplicationTest.sleepBriefly();
        }
    }

    @Test
    void unloadGivesTheWeightsBackAndLoadServesAgain() {
        long weightsBefore = weightBytesOnTheDevice();
        long tinyBert = registry.served("tiny-bert").statistics().weightBytes();
        assertThat(tinyBert).isPositive();

        client.post().uri("/v2/repository/models/tiny-bert/unload").exchange().expectStatus().isOk();
        assertThat(weightsBefore - weightBytesOnTheDevice()).as("device bytes given back").isGreaterThanOrEqualTo(tinyBert);
        client.post().uri("/v2/repository/index").exchange().expectBody()
                .jsonPath("$[?(@.name=='tiny-bert')].state").isEqualTo("UNAVAILABLE");
        client.post().uri("/v2/models/tiny-bert/infer").contentType(MediaType.APPLICATION_JSON)
                .bodyValue("{\"inputs\": [{\"name\": \"text\", \"shape\": [1], \"datatype\": \"BYTES\", \"data\": [\"hi\"]}]}")
                .exchange().expectStatus().isNotFound();
        client.post().uri("/v2/models/iris-mlp/infer").contentType(MediaType.APPLICATION_JSON).bodyValue(SETOSA)
                .exchange().expectStatus().isOk();

        client.post().uri("/v2/repository/models/tiny-bert/load").exchange().expectStatus().isOk();
        assertThat(weightBytesOnTheDevice()).isEqualTo(weightsBefore);
        client.post().uri("/v2/models/tiny-bert/infer").contentType(MediaType.APPLICATION_JSON)
                .bodyValue("{\"inputs\": [{\"name\": \"text\", \"shape\": [1], \"datatype\": \"BYTES\", \"data\": [\"hi\"]}]}")
                .exchange().expectStatus().isOk();
        client.get().uri("/v2/models/tiny-bert/stats").exchange().expectBody()
                .jsonPath("$.model_stats[0].inference_count").isEqualTo(1);
    }

    private long weightBytesOnTheDevice() {
        return devices.devices().getFirst().weightsAllocator().metrics().allocatedBytes();
    }
}
