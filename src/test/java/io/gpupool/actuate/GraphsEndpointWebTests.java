package io.gpupool.actuate;

import io.gpupool.WebTestClients;

import io.gpupool.model.graph.GraphLimits;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.web.server.LocalManagementPort;
import org.springframework.http.MediaType;
import org.springframework.test.web.reactive.server.WebTestClient;

import java.util.Map;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The graphs section of {@code /actuator/gpupool} and its tuning fields over HTTP, with a fake graph
 * cache on cuda:0 and none on cuda:1, as an operator uses them.
 */
@SpringBootTest(classes = OperationsTestApplication.class, webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT,
        properties = {"management.server.port=0", "gpupool.security.operator-password=s3cret"})
class GraphsEndpointWebTests {

    @LocalManagementPort
    int managementPort;

    @Autowired
    FakeGraphCache graphs;

    @Autowired
    FakePool cuda0;

    WebTestClient management;

    @BeforeEach
    void client() {
        graphs.reset();
        cuda0.reset();
        management = WebTestClients.to("http://localhost:" + managementPort + "/actuator");
    }

    private WebTestClient.RequestHeadersSpec<?> tune(String device, Map<String, Object> body) {
        return management.post().uri("/gpupool/" + device).headers(h -> h.setBasicAuth("operator", "s3cret"))
                .contentType(MediaType.APPLICATION_JSON).bodyValue(body);
    }

    @Test
    void theDeviceShowsItsGraphsAndADeviceWithoutGraphsShowsNone() {
        management.get().uri("/gpupool").exchange().expectStatus().isOk().expectBody()
                .jsonPath("$.devices['cuda:0'].graphs.enabled").isEqualTo(true)
                .jsonPath("$.devices['cuda:0'].graphs.graphs").isEqualTo(3)
                .jsonPath("$.devices['cuda:0'].graphs.bytes").isEqualTo(48 << 20)
                .jsonPath("$.devices['cuda:0'].graphs.hits").isEqualTo(1000)
                .jsonPath("$.devices['cuda:0'].graphs.captures").isEqualTo(4)
                .jsonPath("$.devices['cuda:0'].graphs.captureFailures").isEqualTo(1)
                .jsonPath("$.devices['cuda:0'].graphs.replayFailures").isEqualTo(2)
                .jsonPath("$.devices['cuda:0'].graphs.failures").doesNotExist()
                .jsonPath("$.devices['cuda:0'].graphs.maxCount").isEqualTo(64)
                .jsonPath("$.devices['cuda:1'].graphs").doesNotExist();
    }

    @Test
    void graphFieldsTuneTheCacheAloneAndTheAnswerShowsTheNewLimits() {
        long threshold = cuda0.configuration().coalesceThreshold();
        tune("cuda:0", Map.of("graphsMaxCount", 8, "graphsMaxBytes", "256MB")).exchange()
                .expectStatus().isOk().expectBody()
                .jsonPath("$.graphs.maxCount").isEqualTo(8)
                .jsonPath("$.graphs.maxBytes").isEqualTo(256 << 20)
                .jsonPath("$.configuration.coalesceThreshold").isEqualTo((int) threshold);
        assertThat(graphs.limits()).isEqualTo(new GraphLimits(true, 8, 256L << 20));

        tune("cuda:0", Map.of("graphsEnabled", false, "coalesceThreshold", 30)).exchange()
                .expectStatus().isOk().expectBody()
                .jsonPath("$.graphs.enabled").isEqualTo(false)
                .jsonPath("$.configuration.coalesceThreshold").isEqualTo(30);
        assertThat(graphs.limits().enabled()).isFalse();
    }

    @Test
    void aBadGraphFieldIs400NamingItAndChangesNothing() {
        tune("cuda:0", Map.of("graphsMaxCount", "lots", "coalesceThreshold", 30)).exchange()
                .expectStatus().isBadRequest().expectBody()
                .jsonPath("$.field").isEqualTo("graphsMaxCount")
                .jsonPath("$.value").isEqualTo("lots");
        tune("cuda:0", Map.of("graphsMaxCount", 5000)).exchange()
                .expectStatus().isBadRequest().expectBody()
                .jsonPath("$.field").isEqualTo("graphsMaxCount")
                .jsonPath("$.error").value(m -> assertThat((String) m).contains("0 to 4096"));
        tune("cuda:0", Map.of("graphsMaxBytes", "a lot")).exchange()
                .expectStatus().isBadRequest().expectBody().jsonPath("$.field").isEqualTo("graphsMaxBytes");
        tune("cuda:1", Map.of("graphsMaxCount", 5)).exchange()
                .expectStatus().isBadRequest().expectBody()
                .jsonPath("$.field").isEqualTo("graphsMaxCount")
                .jsonPath("$.value").isEqualTo("5")
                .jsonPath("$.error").value(m -> assertThat((String) m).contains("has no CUDA graphs"));
        assertThat(graphs.limits()).isEqualTo(new GraphLimits(true, 64, 1L << 30));
        assertThat(cuda0.configuration().coalesceThreshold()).isNotEqualTo(30);
    }

    @Test
    void prometheusHasTheGraphMeters() {
        String prometheus = management.get().uri("/prometheus").exchange().expectStatus().isOk()
                .expectBody(String.class).returnResult().getResponseBody();
        assertThat(prometheus).containsPattern("gpupool_graphs_hits_total\\{[^}]*device=\"cuda:0\"[^}]*} 1000\\.0");
        assertThat(prometheus).containsPattern("gpupool_graphs_memory_bytes\\{[^}]*device=\"cuda:0\"[^}]*} 5\\.0331648E7");
        assertThat(prometheus).containsPattern("gpupool_graphs_cached\\{[^}]*device=\"cuda:0\"[^}]*} 3\\.0");
        assertThat(prometheus).containsPattern(
                "gpupool_graphs_failures_total\\{[^}]*device=\"cuda:0\"[^}]*stage=\"capture\"[^}]*} 1\\.0");
        assertThat(prometheus).containsPattern(
                "gpupool_graphs_failures_total\\{[^}]*device=\"cuda:0\"[^}]*stage=\"replay\"[^}]*} 2\\.0");
    }
}
