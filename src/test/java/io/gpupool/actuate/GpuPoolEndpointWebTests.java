package io.gpupool.actuate;

import io.gpupool.WebTestClients;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.Map;
import java.util.concurrent.atomic.AtomicBoolean;

import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.web.server.LocalManagementPort;
import org.springframework.boot.test.web.server.LocalServerPort;
import org.springframework.http.MediaType;
import org.springframework.test.web.reactive.server.WebTestClient;

/**
 * The {@code gpupool} endpoint, its security and its meters over HTTP, on a real server with the
 * actuator on its own port, as an operator would use them.
 */
@SpringBootTest(classes = OperationsTestApplication.class, webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT,
        properties = {"management.server.port=0", "gpupool.security.operator-password=s3cret"})
class GpuPoolEndpointWebTests {

    static final long MIB = 1L << 20;

    @LocalManagementPort
    int managementPort;

    @LocalServerPort
    int serverPort;

    @Autowired
    FakePool cuda0;

    @Autowired
    FakePool cuda1;

    @Autowired
    AtomicBoolean modelsWarmedUp;

    @Autowired
    InferenceMetrics inferenceMetrics;

    WebTestClient management;

    @BeforeEach
    void client() {
        cuda0.reset();
        cuda1.reset();
        modelsWarmedUp.set(true);
        management = WebTestClients.to("http://localhost:" + managementPort + "/actuator");
    }

    WebTestClient.RequestBodySpec operatorPost(String uri) {
        return management.post().uri(uri).headers(h -> h.setBasicAuth("operator", "s3cret"))
                .contentType(MediaType.APPLICATION_JSON);
    }

    @Test
    void readsEveryDeviceWithGlobalLevelLocalCachesCountersLatencyAndConfiguration() {
        management.get().uri("/gpupool").exchange()
                .expectStatus().isOk()
                .expectBody()
                .jsonPath("$.devices['cuda:0'].global.reservedBytes").isEqualTo(256 * MIB)
                .jsonPath("$.devices['cuda:0'].global.largestFreeBlockBytes").isEqualTo(64 * MIB)
                .jsonPath("$.devices['cuda:0'].global.fragmentation").isEqualTo(1.0 - 64.0 / 76.0)
                .jsonPath("$.devices['cuda:0'].global.freeBlocks[5].blockBytes").isEqualTo(64 * MIB)
                .jsonPath("$.devices['cuda:0'].global.freeBlocks[5].freeBlocks").isEqualTo(1)
                .jsonPath("$.devices['cuda:0'].global.chunkCount").isEqualTo(1)
                .jsonPath("$.devices['cuda:0'].global.peakAllocatedBytes").isEqualTo(200 * MIB)
                .jsonPath("$.devices['cuda:0'].global.peakRequestedBytes").isEqualTo(180 * MIB)
                .jsonPath("$.devices['cuda:0'].smallObjects[0].objectBytes").isEqualTo(256)
                .jsonPath("$.devices['cuda:0'].localCaches[0].bytes").isEqualTo(12 * MIB)
                .jsonPath("$.devices['cuda:0'].localCaches[0].hitRatio").isEqualTo(600.0 / 700.0)
                .jsonPath("$.devices['cuda:0'].counters.coalesces").isEqualTo(12)
                .jsonPath("$.devices['cuda:0'].global.mapNanos").isEqualTo(3_000_000)
                .jsonPath("$.devices['cuda:0'].global.physicalCreates").isEqualTo(40)
                .jsonPath("$.devices['cuda:0'].global.physicalReleases").isEqualTo(25)
                .jsonPath("$.devices['cuda:0'].global.retainedHandles").isEqualTo(3)
                .jsonPath("$.devices['cuda:0'].global.retainedHandleBytes").isEqualTo(6 * MIB)
                .jsonPath("$.devices['cuda:0'].localCacheCapBytes").isEqualTo(32 * MIB)
                .jsonPath("$.devices['cuda:0'].latency.p50Nanos").isEqualTo(64)
                .jsonPath("$.devices['cuda:0'].latency.p99Nanos").isEqualTo(4096)
                .jsonPath("$.devices['cuda:0'].configuration.coalesceThreshold").isEqualTo(10)
                .jsonPath("$.devices['cuda:0'].capBytes").isEqualTo(920 * MIB) // 0.9 x 1 GiB, down to 2 MiB blocks
                .jsonPath("$.devices['cuda:0'].trace.recording").isEqualTo(false)
                .jsonPath("$.devices['cuda:1'].device").isEqualTo("cuda:1");
    }

    @Test
    void readsOneDeviceAndAnswers404ForAnUnknownOne() {
        management.get().uri("/gpupool/cuda:1").exchange()
                .expectStatus().isOk()
                .expectBody().jsonPath("$.device").isEqualTo("cuda:1").jsonPath("$.trace").doesNotExist();
        management.get().uri("/gpupool/cuda:9").exchange().expectStatus().isNotFound();
        management.get().uri("/gpupool/cuda:0/nonsense").exchange().expectStatus()
                .isUnauthorized();
        management.get().uri("/gpupool/cuda:0/nonsense").headers(h -> h.setBasicAuth("operator", "s3cret")).exchange()
                .expectStatus().isNotFound()
                .expectBody().jsonPath("$.error").isEqualTo("no section 'nonsense'; sections: layout, trace");
    }

    @Test
    void tuningAppliesAtOnceAndShowsInTheNextReadAndInTheMetrics() {
        operatorPost("/gpupool/cuda:0")
                .bodyValue(Map.of("coalesceThreshold", 25, "localCacheBytesPerStream", "128MB", "capFraction", 0.5,
                        "mappedSlack", 0.25, "waitBeyondBudget", true, "reclaimOrder", "COLDEST_IN_ORDER",
                        "reclaimHysteresis", 0))
                .exchange()
                .expectStatus().isOk()
                .expectBody()
                .jsonPath("$.configuration.coalesceThreshold").isEqualTo(25)
                .jsonPath("$.configuration.reclaimOrder").isEqualTo("COLDEST_IN_ORDER")
                .jsonPath("$.configuration.reclaimHysteresis").isEqualTo(0.0)
                .jsonPath("$.configuration.mappedSlack").isEqualTo(0.25)
                .jsonPath("$.configuration.waitBeyondBudget").isEqualTo(true)
                .jsonPath("$.configuration.localCacheBytesPerStream").isEqualTo(128 * MIB)
                .jsonPath("$.capBytes").isEqualTo(512 * MIB);
        management.get().uri("/gpupool/cuda:0").exchange()
                .expectBody().jsonPath("$.configuration.coalesceThreshold").isEqualTo(25)
                .jsonPath("$.capBytes").isEqualTo(512 * MIB);
        String prometheus = scrape();
        assertThat(prometheus).containsPattern("gpupool_coalesce_threshold\\{[^}]*device=\"cuda:0\"[^}]*} 25\\.0");
        assertThat(prometheus).containsPattern("gpupool_memory_cap_bytes\\{[^}]*device=\"cuda:0\"[^}]*} 5\\.36870912E8");
        assertThat(prometheus).containsPattern("gpupool_local_cache_cap_bytes\\{[^}]*device=\"cuda:0\"[^}]*} 1\\.34217728E8");
        assertThat(prometheus).containsPattern("gpupool_mapped_slack\\{[^}]*device=\"cuda:0\"[^}]*} 0\\.25");
        assertThat(prometheus).containsPattern("gpupool_wait_beyond_budget\\{[^}]*device=\"cuda:0\"[^}]*} 1\\.0");
    }

    @Test
    void anOutOfRangeTuningIs400NamingTheFieldAndTheRangeAndChangesNothing() {
        operatorPost("/gpupool/cuda:1").bodyValue(Map.of("coalesceThreshold", 0, "localCacheCountPerClass", 8))
                .exchange()
                .expectStatus().isBadRequest()
                .expectBody()
                .jsonPath("$.field").isEqualTo("coalesceThreshold")
                .jsonPath("$.value").isEqualTo("0")
                .jsonPath("$.allowed").isEqualTo("[1, 1000000]")
                .jsonPath("$.error").value(m -> assertThat((String) m).contains("coalesceThreshold"));
        management.get().uri("/gpupool/cuda:1").exchange()
                .expectBody().jsonPath("$.configuration.localCacheCountPerClass").isEqualTo(16);
    }

    @Test
    void unparseableValuesAndEmptyBodiesAre400NamingTheField() {
        operatorPost("/gpupool/cuda:1").bodyValue(Map.of("localCacheBytesPerStream", "lots")).exchange()
                .expectStatus().isBadRequest()
                .expectBody().jsonPath("$.field").isEqualTo("localCacheBytesPerStream");
        operatorPost("/gpupool/cuda:1").bodyValue(Map.of("releaseIdleAge", "soon")).exchange()
                .expectStatus().isBadRequest()
                .expectBody().jsonPath("$.field").isEqualTo("releaseIdleAge");
        operatorPost("/gpupool/cuda:1").bodyValue(Map.of()).exchange()
                .expectStatus().isBadRequest()
                .expectBody().jsonPath("$.error").value(m -> assertThat((String) m).contains("coalesceThreshold"));
        operatorPost("/gpupool/cuda:9").bodyValue(Map.of("coalesceThreshold", 5)).exchange()
                .expectStatus().isNotFound();
    }

    @Test
    void unknownFieldsAre400NamingThemAndChangeNothing() {
        operatorPost("/gpupool/cuda:1").bodyValue(Map.of("bogus", 1)).exchange()
                .expectStatus().isBadRequest()
                .expectBody().jsonPath("$.field").isEqualTo("bogus")
                .jsonPath("$.error").value(m -> assertThat((String) m).startsWith("unknown tuning field bogus;"));
        operatorPost("/gpupool/cuda:1").bodyValue(Map.of("coalesceThreshold", 30, "coalesceTreshold", 30)).exchange()
                .expectStatus().isBadRequest()
                .expectBody().jsonPath("$.field").isEqualTo("coalesceTreshold");
        management.get().uri("/gpupool/cuda:1").exchange()
                .expectBody().jsonPath("$.configuration.coalesceThreshold").isEqualTo(10);
        operatorPost("/gpupool/cuda:9").bodyValue(Map.of("bogus", 1)).exchange()
                .expectStatus().isNotFound() // an unknown device is the answer, whatever the fields
                .expectBody().jsonPath("$.error").value(m -> assertThat((String) m)
                        .isEqualTo("no device 'cuda:9'; devices: cuda:0, cuda:1"));
    }

    @Test
    void aFieldGivenOnlyAsNullIs400NamingItAndChangesNothing() {
        operatorPost("/gpupool/cuda:1").bodyValue("{\"capBytes\": null}").exchange()
                .expectStatus().isBadRequest()
                .expectBody().jsonPath("$.field").isEqualTo("capBytes")
                .jsonPath("$.error").value(m -> assertThat((String) m).contains("capBytes = null")
                        .contains("changes no field"));
        management.get().uri("/gpupool/cuda:1").exchange().expectBody().jsonPath("$.capBytes").isEqualTo(920 * MIB);
    }

    @Test
    void aBodyThatIsNoJsonObjectIs400SayingWhatABodyMustBeAndChangesNothing() {
        for (String body : new String[] {"[]", "3", "\"coalesceThreshold\""}) {
            operatorPost("/gpupool/cuda:1").bodyValue(body).exchange()
                    .expectStatus().isBadRequest()
                    .expectBody().jsonPath("$.error").value(m -> assertThat((String) m).as(body)
                            .startsWith("the request body must be one JSON object of fields"));
        }
        for (String body : new String[] {"{\"coalesceThreshold\": [1]}", "{\"coalesceThreshold\": {\"a\": 1}}"}) {
            operatorPost("/gpupool/cuda:1").bodyValue(body).exchange()
                    .expectStatus().isBadRequest()
                    .expectBody().jsonPath("$.error").value(m -> assertThat((String) m).as(body)
                            .isEqualTo("field coalesceThreshold must be one JSON number, string or boolean, not an array or object"));
        }
        operatorPost("/gpupool/cuda:1").bodyValue("{\"coalesceThreshold\": 30").exchange()
                .expectStatus().isBadRequest()
                .expectBody().jsonPath("$.error").value(m -> assertThat((String) m)
                        .startsWith("the request body is not valid JSON: Unexpected end-of-input")
                        .doesNotContain("Source"));
        management.get().uri("/gpupool/cuda:1").exchange()
                .expectBody().jsonPath("$.configuration.coalesceThreshold").isEqualTo(10);
    }

    @Test
    void aContentEncodedBodyIs415NamingTheCodingAndChangesNothing() {
        for (String coding : new String[] {"gzip", "br", "deflate, gzip"}) {
            operatorPost("/gpupool/cuda:1").header("Content-Encoding", coding).bodyValue("{\"coalesceThreshold\": 20}")
                    .exchange()
                    .expectStatus().isEqualTo(415)
                    .expectBody().jsonPath("$.error").value(m -> assertThat((String) m).as(coding)
                            .contains("read no Content-Encoding (the request has '" + coding + "')"));
        }
        management.get().uri("/gpupool/cuda:1").exchange()
                .expectBody().jsonPath("$.configuration.coalesceThreshold").isEqualTo(10);
        management.get().uri("/gpupool/cuda:1").header("Content-Encoding", "gzip").exchange()
                .expectStatus().isOk();                        // no body: a stray header changes nothing
        operatorPost("/gpupool/cuda:1").header("Content-Encoding", "identity").bodyValue("{\"coalesceThreshold\": 20}")
                .exchange().expectStatus().isOk();
        management.get().uri("/gpupool/cuda:1").exchange()
                .expectBody().jsonPath("$.configuration.coalesceThreshold").isEqualTo(20);
    }

    @Test
    void aFieldGivenTwiceIs400NamingItAndChangesNothing() {
        operatorPost("/gpupool/cuda:1").bodyValue("{\"coalesceThreshold\": 20, \"coalesceThreshold\": 30}").exchange()
                .expectStatus().isBadRequest()
                .expectBody().jsonPath("$.error").value(m -> assertThat((String) m)
                        .startsWith("the request body is not valid JSON: Duplicate Object property \"coalesceThreshold\""));
        management.get().uri("/gpupool/cuda:1").exchange()
                .expectBody().jsonPath("$.configuration.coalesceThreshold").isEqualTo(10);
    }

    @Test
    void javaNumberLiteralsAreNotNumbers() {
        for (String text : new String[] {"0.5d", "0x1p-3"}) {
            operatorPost("/gpupool/cuda:1").bodyValue(Map.of("capFraction", text)).exchange()
                    .expectStatus().isBadRequest()
                    .expectBody().jsonPath("$.field").isEqualTo("capFraction").jsonPath("$.value").isEqualTo(text);
        }
        operatorPost("/gpupool/cuda:1").bodyValue("{\"capFraction\": 1e999}").exchange()
                .expectStatus().isBadRequest()
                .expectBody().jsonPath("$.field").isEqualTo("capFraction").jsonPath("$.value").isEqualTo("1e999");
        management.get().uri("/gpupool/cuda:1").exchange().expectBody().jsonPath("$.capBytes").isEqualTo(920 * MIB);
    }

    @Test
    void aCapFractionThatResolvesBelowOneBlockIsRefusedAsACapInBytesIs() {
        operatorPost("/gpupool/cuda:1").bodyValue(Map.of("capFraction", 1e-9)).exchange()
                .expectStatus().isBadRequest()
                .expectBody().jsonPath("$.field").isEqualTo("capFraction")
                .jsonPath("$.allowed").value(a -> assertThat((String) a).contains("minBlockBytes (2097152)"));
        operatorPost("/gpupool/cuda:1").bodyValue(Map.of("capBytes", "1MB")).exchange()
                .expectStatus().isBadRequest()
                .expectBody().jsonPath("$.field").isEqualTo("capBytes");
        management.get().uri("/gpupool/cuda:1").exchange().expectBody().jsonPath("$.capBytes").isEqualTo(920 * MIB);
        operatorPost("/gpupool/cuda:1").bodyValue(Map.of("capFraction", 0.002)).exchange() // 2.05 MiB: one block
                .expectStatus().isOk()
                .expectBody().jsonPath("$.capBytes").isEqualTo(2 * MIB);
    }

    @Test
    void aSectionAskedForAsJsonOrCsvAnswersAsTheSectionIsNeverA500() {
        management.get().uri("/gpupool/cuda:1/layout").accept(MediaType.APPLICATION_JSON).exchange()
                .expectStatus().isOk().expectHeader().contentTypeCompatibleWith(MediaType.APPLICATION_JSON);
        for (MediaType accept : new MediaType[] {MediaType.APPLICATION_JSON, MediaType.valueOf("text/csv")}) {
            management.get().uri("/gpupool/cuda:9/layout").accept(accept).exchange()
                    .expectStatus().isNotFound().expectBody().jsonPath("$.error").isEqualTo(
                            "no device 'cuda:9'; devices: cuda:0, cuda:1");
            management.get().uri("/gpupool/cuda:1/bogus").accept(accept)
                    .headers(h -> h.setBasicAuth("operator", "s3cret")).exchange()
                    .expectStatus().isNotFound().expectBody().jsonPath("$.error").value(
                            e -> assertThat((String) e).startsWith("no section 'bogus'"));
        }
    }

    @Test
    void aCapInBytesBeyondTheDevicesMemoryOrBesideAFractionIsRefused() {
        operatorPost("/gpupool/cuda:1").bodyValue(Map.of("capBytes", "1TB")).exchange()
                .expectStatus().isBadRequest()
                .expectBody().jsonPath("$.field").isEqualTo("capBytes")
                .jsonPath("$.allowed").value(a -> assertThat((String) a).contains("at most the device's"));
        operatorPost("/gpupool/cuda:1").bodyValue(Map.of("capBytes", "512MB", "capFraction", 0.01)).exchange()
                .expectStatus().isBadRequest()
                .expectBody().jsonPath("$.field").isEqualTo("capFraction")
                .jsonPath("$.allowed").value(a -> assertThat((String) a).contains("send one of them"));
        management.get().uri("/gpupool/cuda:1").exchange().expectBody().jsonPath("$.capBytes").isEqualTo(920 * MIB);
    }

    @Test
    void aMaxGrowthStepBelowTheGrowthStepIsRefusedInItsOwnName() {
        operatorPost("/gpupool/cuda:1").bodyValue(Map.of("maxGrowthStepBytes", "128MB")).exchange()
                .expectStatus().isBadRequest()
                .expectBody().jsonPath("$.field").isEqualTo("maxGrowthStepBytes")
                .jsonPath("$.value").isEqualTo(String.valueOf(128 * MIB))
                .jsonPath("$.allowed").isEqualTo("at least growthStepBytes (" + 256 * MIB + ")");
        operatorPost("/gpupool/cuda:1").bodyValue(Map.of("maxGrowthStepBytes", "512MB")).exchange()
                .expectStatus().isOk()
                .expectBody().jsonPath("$.configuration.maxGrowthStepBytes").isEqualTo(512 * MIB);
    }

    @Test
    void writesWithoutTheOperatorCredentialAre401AndChangeNothing() {
        management.post().uri("/gpupool/cuda:1").contentType(MediaType.APPLICATION_JSON)
                .bodyValue(Map.of("coalesceThreshold", 99)).exchange()
                .expectStatus().isUnauthorized()
                .expectHeader().valueMatches("WWW-Authenticate", "Basic.*");
        management.post().uri("/gpupool/cuda:1").headers(h -> h.setBasicAuth("operator", "wrong"))
                .contentType(MediaType.APPLICATION_JSON).bodyValue(Map.of("coalesceThreshold", 99)).exchange()
                .expectStatus().isUnauthorized();
        management.delete().uri("/gpupool").exchange().expectStatus().isUnauthorized();
        management.delete().uri("/gpupool").header("X-Requested-With", "XMLHttpRequest").exchange()
                .expectStatus().isUnauthorized()
                .expectHeader().doesNotExist("WWW-Authenticate"); // scripts (the dashboard) get no browser prompt
        management.get().uri("/gpupool/cuda:1").exchange()
                .expectBody().jsonPath("$.configuration.coalesceThreshold").isEqualTo(10);
    }

    @Test
    void trimAnswersTheBytesReleasedPerDeviceAndInTotal() {
        management.delete().uri("/gpupool").headers(h -> h.setBasicAuth("operator", "s3cret")).exchange()
                .expectStatus().isOk()
                .expectBody()
                .jsonPath("$.releasedBytes").isEqualTo(128 * MIB)
                .jsonPath("$.devices['cuda:0']").isEqualTo(64 * MIB)
                .jsonPath("$.devices['cuda:1']").isEqualTo(64 * MIB);
        management.delete().uri("/gpupool/cuda:0").headers(h -> h.setBasicAuth("operator", "s3cret")).exchange()
                .expectStatus().isOk()
                .expectBody().jsonPath("$.releasedBytes").isEqualTo(64 * MIB);
        management.delete().uri("/gpupool/cuda:9").headers(h -> h.setBasicAuth("operator", "s3cret")).exchange()
                .expectStatus().isNotFound();
        assertThat(cuda0.trims.get()).isEqualTo(2);
    }

    @Test
    void traceRecordingIsTrueOrFalseAndAnythingElseIs400NamingIt() {
        for (Object value : new Object[] {"yes", 1, "on"}) {
            operatorPost("/gpupool/cuda:0/trace").bodyValue(Map.of("recording", value)).exchange()
                    .expectStatus().isBadRequest()
                    .expectBody().jsonPath("$.error").isEqualTo("recording = " + value + " is invalid; allowed: true or false");
        }
        operatorPost("/gpupool/cuda:0/trace").bodyValue(Map.of("other", true)).exchange()
                .expectStatus().isBadRequest()
                .expectBody().jsonPath("$.error").isEqualTo("recording = (missing) is invalid; allowed: true or false");
        management.get().uri("/gpupool/cuda:0").exchange().expectBody().jsonPath("$.trace.recording").isEqualTo(false);
    }

    @Test
    void traceRecordingStartsStopsAndDownloadsAsCsv() {
        operatorPost("/gpupool/cuda:0/trace").bodyValue(Map.of("recording", true)).exchange()
                .expectStatus().isOk()
                .expectBody().jsonPath("$.recording").isEqualTo(true);
        operatorPost("/gpupool/cuda:0/trace").bodyValue(Map.of("recording", false)).exchange()
                .expectStatus().isOk()
                .expectBody().jsonPath("$.recording").isEqualTo(false).jsonPath("$.events").isEqualTo(2);
        String csv = management.get().uri("/gpupool/cuda:0/trace").headers(h -> h.setBasicAuth("operator", "s3cret"))
                .exchange()
                .expectStatus().isOk()
                .expectHeader().contentTypeCompatibleWith("text/csv")
                .expectBody(String.class).returnResult().getResponseBody();
        assertThat(csv).startsWith("Thread,Time,Action,Pointer,Size,Stream\n").contains(",allocate,0x5eed,4096,0")
                .as("no raw addresses unless asked").doesNotContain("0x7f0000000000");
        String raw = management.get().uri("/gpupool/cuda:0/trace?addresses=raw")
                .headers(h -> h.setBasicAuth("operator", "s3cret")).exchange()
                .expectStatus().isOk()
                .expectBody(String.class).returnResult().getResponseBody();
        assertThat(raw).contains(",allocate,0x7f0000000000,4096,0");
        management.get().uri("/gpupool/cuda:0/trace?addresses=bogus").headers(h -> h.setBasicAuth("operator", "s3cret"))
                .exchange().expectStatus().isBadRequest();
        management.post().uri("/gpupool/cuda:0/trace").contentType(MediaType.APPLICATION_JSON)
                .bodyValue(Map.of("recording", true)).exchange().expectStatus().isUnauthorized();
        operatorPost("/gpupool/cuda:1/trace").bodyValue(Map.of("recording", true)).exchange()
                .expectStatus().isEqualTo(409);
    }

    @Test
    void layoutListsEveryLeafBlockWithItsState() {
        management.get().uri("/gpupool/cuda:0/layout").exchange()
                .expectStatus().isOk()
                .expectBody()
                .jsonPath("$.minBlockBytes").isEqualTo(2 * MIB)
                .jsonPath("$.chunks[0].bytes").isEqualTo(256 * MIB)
                .jsonPath("$.chunks[0].freeBytes").isEqualTo(76 * MIB)
                .jsonPath("$.chunks[0].blocks.length()").isEqualTo(9)
                .jsonPath("$.chunks[0].blocks[2].state").isEqualTo("split")
                .jsonPath("$.chunks[0].blocks[6].state").isEqualTo("cached");
    }

    @Test
    void monitoringReadsAreOpenAndEveryOtherActuatorEndpointIsDenied() {
        management.get().uri("/health").exchange().expectStatus().isOk();
        management.get().uri("/metrics").exchange().expectStatus().isOk();
        management.get().uri("/prometheus").exchange().expectStatus().isOk();
        management.get().uri("/dashboard").exchange().expectStatus().isOk()
                .expectHeader().contentTypeCompatibleWith(MediaType.TEXT_HTML);
        management.get().uri("/env").exchange().expectStatus().isUnauthorized();
        management.get().uri("/env").headers(h -> h.setBasicAuth("operator", "s3cret")).exchange()
                .expectStatus().isForbidden();
        management.get().uri("/beans").exchange().expectStatus().isUnauthorized();
        WebTestClient root = WebTestClients.to("http://localhost:" + managementPort);
        root.get().uri("/anything").exchange().expectStatus().isUnauthorized();
    }

    @Test
    void theApplicationPortStaysOpenWithoutCredentialOrCsrfToken() {
        WebTestClient app = WebTestClients.to("http://localhost:" + serverPort);
        app.post().uri("/v2/models/none/infer").contentType(MediaType.APPLICATION_JSON).bodyValue("{}").exchange()
                .expectStatus().isNotFound();
        app.get().uri("/actuator/gpupool").exchange().expectStatus().isNotFound();
    }

    @Test
    void readinessWaitsForTheModelsWhileLivenessDoesNot() {
        modelsWarmedUp.set(false);
        management.get().uri("/health/readiness").exchange().expectStatus().isEqualTo(503);
        management.get().uri("/health/liveness").exchange().expectStatus().isOk();
        modelsWarmedUp.set(true);
        management.get().uri("/health/readiness").exchange().expectStatus().isOk()
                .expectBody().jsonPath("$.status").isEqualTo("UP");
    }

    @Test
    void poolHealthGoesDownWhileAllocationsFailAndRecovers() {
        management.get().uri("/health/pool").exchange().expectStatus().isOk();
        cuda0.failures.incrementAndGet();
        management.get().uri("/health/pool").exchange().expectStatus().isEqualTo(503)
                .expectBody().jsonPath("$.details['cuda:0'].reason").exists();
        management.get().uri("/health/pool").exchange().expectStatus().isOk();
    }

    @Test
    void prometheusHasThePoolAndInferenceMeters() {
        InferenceMetrics.Request request = inferenceMetrics.enqueued("bert", "cuda:0");
        request.started();
        request.finished(InferenceOutcome.SUCCESS);
        inferenceMetrics.enqueued("bert", "cuda:0").finished(InferenceOutcome.OVERLOADED);
        String text = scrape();
        assertThat(text)
                .contains("gpupool_memory_reserved_bytes{application=\"gpupool\",device=\"cuda:0\",level=\"global\"}")
                .contains("gpupool_memory_allocated_bytes{")
                .contains("gpupool_memory_peak_requested_bytes{")
                .contains("gpupool_memory_cached_bytes{application=\"gpupool\",device=\"cuda:0\",level=\"local\"}")
                .contains("gpupool_fragmentation{")
                .contains("gpupool_free_largest_bytes{")
                .contains("gpupool_free_blocks{")
                .contains("gpupool_local_hit_ratio{")
                .contains("gpupool_grows_total{")
                .contains("gpupool_trims_total{")
                .contains("gpupool_coalesces_total{")
                .containsPattern("gpupool_map_time_seconds_count\\{[^}]*device=\"cuda:0\"[^}]*} 4")
                .containsPattern("gpupool_map_time_seconds_sum\\{[^}]*device=\"cuda:0\"[^}]*} 0\\.003")
                .containsPattern("gpupool_physical_creates_total\\{[^}]*device=\"cuda:0\"[^}]*} 40\\.0")
                .containsPattern("gpupool_physical_releases_total\\{[^}]*device=\"cuda:0\"[^}]*} 25\\.0")
                .containsPattern("gpupool_retained_handles\\{[^}]*device=\"cuda:0\"[^}]*} 3\\.0")
                .containsPattern("gpupool_memory_retained_bytes\\{[^}]*device=\"cuda:0\"[^}]*} 6291456\\.0")
                .containsPattern("gpupool_local_cache_cap_in_force_bytes\\{[^}]*device=\"cuda:0\"[^}]*} 3\\.3554432E7")
                .contains("gpupool_recoveries_total{")
                .contains("gpupool_failures_total{")
                .contains("gpupool_allocation_latency_buckets_total{")
                .contains("gpupool_allocation_latency_quantile_seconds{")
                .contains("# HELP gpupool_memory_reserved_bytes Device memory the pool holds")
                .containsPattern("gpupool_inference_requests_total\\{[^}]*model=\"bert\",outcome=\"success\"} 1\\.0")
                .containsPattern("gpupool_inference_requests_total\\{[^}]*model=\"bert\",outcome=\"overloaded\"} 1\\.0")
                .contains("gpupool_inference_queue_wait_seconds_bucket{")
                .contains("gpupool_inference_compute_seconds_count{")
                .containsPattern("gpupool_inference_queue_depth\\{[^}]*device=\"cuda:0\"} 0\\.0")
                .containsPattern("gpupool_inference_in_flight\\{[^}]*device=\"cuda:0\"} 0\\.0");
        // The latency histogram is cumulative: every sample is at or below +Inf, 90 of 100 below 128 ns.
        assertThat(text).containsPattern("gpupool_allocation_latency_buckets_total\\{[^}]*device=\"cuda:0\",le=\"\\+Inf\"} 100\\.0");
        assertThat(text).containsPattern("gpupool_allocation_latency_buckets_total\\{[^}]*device=\"cuda:0\",le=\"1\\.28E-7\"} 90\\.0");
    }

    private String scrape() {
        return management.get().uri("/prometheus").exchange().expectStatus().isOk()
                .expectBody(String.class).returnResult().getResponseBody();
    }
}
