package io.gpupool.lab;

import com.sun.net.httpserver.HttpServer;
import org.junit.jupiter.api.Test;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.json.JsonMapper;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.SplittableRandom;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class LoadDriverTest {

    private final JsonMapper json = JsonMapper.builder().build();

    @Test
    void payloadsFollowTheModelMetadataWithBatchAndSequenceInRange() {
        JsonNode metadata = json.readTree("""
                {"name":"tiny-bert","inputs":[
                  {"name":"input_ids","datatype":"INT64","shape":[-1,-1]},
                  {"name":"attention_mask","datatype":"INT64","shape":[-1,-1]},
                  {"name":"token_type_ids","datatype":"INT64","shape":[-1,-1]}]}""");
        Workload.Mix mix = LoadDriver.parse("--batch-max", "4", "--seq-min", "8", "--seq-max", "16", "--vocab", "50").mix();
        SplittableRandom random = new SplittableRandom(1);
        for (int i = 0; i < 50; i++) {
            long[] tokens = new long[1];
            JsonNode body = json.readTree(Workload.metadataPayload(metadata, mix, random, tokens));
            JsonNode ids = body.get("inputs").get(0);
            long batch = ids.get("shape").get(0).asLong();
            long seq = ids.get("shape").get(1).asLong();
            assertThat(batch).isBetween(1L, 4L);
            assertThat(seq).isBetween(8L, 16L);
            assertThat(tokens[0]).isEqualTo(batch * seq);
            assertThat(ids.get("data").size()).isEqualTo((int) (batch * seq));
            for (JsonNode id : ids.get("data")) {
                assertThat(id.asInt()).isBetween(1, 49);
            }
            JsonNode mask = body.get("inputs").get(1);
            assertThat(mask.get("shape")).isEqualTo(ids.get("shape"));
            mask.get("data").forEach(v -> assertThat(v.asInt()).isEqualTo(1));
            body.get("inputs").get(2).get("data").forEach(v -> assertThat(v.asInt()).isZero());
        }
    }

    @Test
    void fixedDimensionsAreKeptAndFloatInputsGetNumbers() {
        JsonNode metadata = json.readTree("""
                {"inputs":[{"name":"features","datatype":"FP32","shape":[-1,4]}]}""");
        Workload.Mix mix = LoadDriver.parse("--batch-max", "3").mix();
        JsonNode body = json.readTree(Workload.metadataPayload(metadata, mix, new SplittableRandom(2), new long[1]));
        JsonNode features = body.get("inputs").get(0);
        assertThat(features.get("shape").get(1).asLong()).isEqualTo(4);
        assertThat(features.get("data").size()).isEqualTo(4 * features.get("shape").get(0).asInt());
        assertThat(features.get("data").get(0).isNumber()).isTrue();
    }

    @Test
    void bertMixStaysWithinBatchAndSequenceBoundsAndIsValidJson() {
        Workload.Mix mix = LoadDriver.parse("--batch-max", "32", "--seq-median", "128", "--seq-max", "512").mix();
        Workload workload = Workload.prepare(mix, 200, 3);
        SplittableRandom random = new SplittableRandom(4);
        int longest = 0;
        for (int i = 0; i < 200; i++) {
            Workload.Request request = workload.next(random);
            JsonNode ids = json.readTree(request.body()).get("inputs").get(0);
            int batch = ids.get("shape").get(0).asInt();
            int seq = ids.get("shape").get(1).asInt();
            assertThat(batch).isBetween(1, 32);
            assertThat(seq).isBetween(1, 512);
            assertThat(ids.get("data").size()).isEqualTo(batch * seq);
            longest = Math.max(longest, seq);
        }
        assertThat(longest).as("the log-normal tail reaches well past the median").isGreaterThan(200);
    }

    @Test
    void percentilesUseNearestRank() {
        int[] sorted = new int[100];
        for (int i = 0; i < 100; i++) {
            sorted[i] = i + 1;
        }
        assertThat(Recorder.quantile(sorted, 0.5)).isEqualTo(50.0);
        assertThat(Recorder.quantile(sorted, 0.99)).isEqualTo(99.0);
        assertThat(Recorder.quantile(sorted, 0.999)).isEqualTo(100.0);
        assertThat(Recorder.quantile(new int[0], 0.5)).isNaN();
    }

    @Test
    void histogramBucketsCountEveryLatencyOnce() {
        int[] sortedMicros = {90, 100, 101, 141, 142, 1000, 5000};
        JsonNode histogram = LoadDriver.histogram(sortedMicros);
        long total = 0;
        for (JsonNode count : histogram.get("count")) {
            total += count.asLong();
        }
        assertThat(total).isEqualTo(sortedMicros.length);
        assertThat(histogram.get("le_ms").get(0).asDouble()).isEqualTo(0.1);
        assertThat(histogram.get("count").get(0).asInt()).as("<= 0.1 ms").isEqualTo(2);
        assertThat(histogram.get("count").get(1).asInt()).as("(0.1, 0.1414] ms: 101 and 141 µs").isEqualTo(2);
        assertThat(histogram.get("count").get(2).asInt()).as("(0.1414, 0.2] ms: 142 µs").isEqualTo(1);
        assertThat(histogram.get("le_ms").get(histogram.get("le_ms").size() - 1).asDouble()).isGreaterThanOrEqualTo(5.0);
    }

    @Test
    void badOptionsAreRejectedByName() {
        assertThatThrownBy(() -> LoadDriver.parse("--concurrency", "0")).hasMessageContaining("--concurrency");
        assertThatThrownBy(() -> LoadDriver.parse("--seq-min", "10", "--seq-max", "5")).hasMessageContaining("--seq-max");
        assertThatThrownBy(() -> LoadDriver.parse("--duration", "soon")).hasMessageContaining("30s");
        assertThatThrownBy(() -> LoadDriver.parse("--bogus", "1")).hasMessageContaining("--bogus");
        assertThatThrownBy(() -> LoadDriver.parse("--cancel", "2")).hasMessageContaining("--cancel");
        assertThat(LoadDriver.duration("--duration", "1.5m")).isEqualTo(Duration.ofSeconds(90));
        assertThat(LoadDriver.duration("--duration", "250ms")).isEqualTo(Duration.ofMillis(250));
    }

    @Test
    void onlyLoopbackTargetsAreAccepted() {
        assertThatThrownBy(() -> LoadDriver.requireLoopback(java.net.URI.create("http://192.0.2.1:8080")))
                .hasMessageContaining("loopback");
        LoadDriver.requireLoopback(java.net.URI.create("http://127.0.0.1:8080"));
    }

    /**
     * Against a stand-in server that answers 200 to well-formed requests, 400 to malformed ones and a
     * 500 to those using the binary extension: the report counts each, names the cases behind the 500s, and the checks fail.
     */
    @Test
    void reportCountsStatusesAndNamesTheRequestBehindAnUnexpected500() throws Exception {
        HttpServer server = HttpServer.create(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0), 0);
        server.createContext("/", exchange -> {
            byte[] body = exchange.getRequestBody().readAllBytes();
            String text = new String(body, StandardCharsets.UTF_8);
            int status = exchange.getRequestURI().getPath().equals("/v2/health/ready") ? 200
                    : exchange.getRequestHeaders().containsKey("Inference-Header-Content-Length") ? 500
                    : text.startsWith("{\"id\":\"load-") ? 200 : 400;
            byte[] answer = "{}".getBytes(StandardCharsets.UTF_8);
            exchange.sendResponseHeaders(status, answer.length);
            exchange.getResponseBody().write(answer);
            exchange.close();
        });
        server.start();
        try {
            String url = "http://127.0.0.1:" + server.getAddress().getPort();
            // the request count ends the run; the duration only bounds it on a machine that stalls
            LoadDriver.Options options = LoadDriver.parse("--url", url, "--actuator", "none", "--duration", "60s",
                    "--warmup", "0s", "--concurrency", "2", "--malformed", "0.5", "--requests", "400", "--quiet",
                    "--drain", "0s");
            LoadDriver.Result result = new LoadDriver(options, new PrintStream(new ByteArrayOutputStream())).run();
            JsonNode report = result.report();
            long ok = report.get("status").path("200").asLong();
            long bad = report.get("status").path("400").asLong();
            long errors = report.get("status").path("500").asLong();
            assertThat(ok + bad + errors).isEqualTo(report.get("requests").asLong()).isEqualTo(400);
            assertThat(ok).isPositive();
            assertThat(bad).isPositive();
            assertThat(result.unexpected5xx()).isEqualTo(errors);
            assertThat(errors).isPositive();
            assertThat(report.get("unexpected").propertyNames()).isNotEmpty()
                    .allSatisfy(name -> assertThat(name).startsWith("binary"));
            assertThat(result.expectationsMet()).isFalse();
            assertThat(report.get("latency_ms").get("count").asLong()).isEqualTo(ok);
            assertThat(report.get("ready_after").asInt()).isEqualTo(200);
        } finally {
            server.stop(0);
        }
    }

    /** --check must fail when the pool endpoint cannot be read: "0 allocated bytes" was not observed. */
    @Test
    void theCheckFailsWhenThePoolCannotBeRead() throws Exception {
        HttpServer server = HttpServer.create(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0), 0);
        server.createContext("/", exchange -> {
            exchange.getRequestBody().readAllBytes();
            exchange.sendResponseHeaders(exchange.getRequestURI().getPath().startsWith("/actuator") ? 401 : 200, -1);
            exchange.close();
        });
        server.start();
        try {
            String url = "http://127.0.0.1:" + server.getAddress().getPort();
            LoadDriver.Options options = LoadDriver.parse("--url", url, "--actuator", url, "--duration", "1s",
                    "--warmup", "0s", "--concurrency", "1", "--requests", "5", "--quiet", "--drain", "0s");
            LoadDriver.Result result = new LoadDriver(options, new PrintStream(new ByteArrayOutputStream())).run();
            assertThat(result.unexpected5xx()).isZero();
            assertThat(result.expectationsMet()).isFalse();
            assertThat(result.failedExpectations()).anySatisfy(failure ->
                    assertThat(failure).contains("the pool could not be read").contains("401"));
        } finally {
            server.stop(0);
        }
    }

    /**
     * A pool left with allocated bytes fails the check, and the failure says what holds them: the kernels' stream
     * workspaces (and how many of them CUDA graphs captured), the cached graphs, and the unexplained rest.
     */
    @Test
    void aPoolThatDidNotDrainIsReportedWithWhatStillHoldsIt() throws Exception {
        String pools = """
                {"devices": {"cuda:0": {"mode": "TWO_LEVEL", "global": {"allocatedBytes": 7340032},
                  "kernels": {"gemmEngine": "fakeLt", "activations": "bf16",
                    "workspaces": {"bytes": 4194304, "capturedBytes": 2097152, "streams": 2,
                                   "bytesPerStream": 2097152, "releases": 0}},
                  "graphs": {"bytes": 2097152}}}}""";
        HttpServer server = HttpServer.create(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0), 0);
        server.createContext("/", exchange -> {
            exchange.getRequestBody().readAllBytes();
            byte[] answer = (exchange.getRequestURI().getPath().equals("/actuator/gpupool") ? pools : "{}")
                    .getBytes(StandardCharsets.UTF_8);
            exchange.sendResponseHeaders(200, answer.length);
            exchange.getResponseBody().write(answer);
            exchange.close();
        });
        server.start();
        try {
            String url = "http://127.0.0.1:" + server.getAddress().getPort();
            LoadDriver.Options options = LoadDriver.parse("--url", url, "--actuator", url, "--duration", "1s",
                    "--warmup", "0s", "--concurrency", "1", "--requests", "3", "--quiet", "--drain", "0s");
            LoadDriver.Result result = new LoadDriver(options, new PrintStream(new ByteArrayOutputStream())).run();
            assertThat(result.allocatedAfterDrain()).as("the cached graphs' 2 MiB left out").isEqualTo(5 << 20);
            assertThat(result.failedExpectations()).anySatisfy(failure -> assertThat(failure)
                    .contains("pool allocated bytes after drain, less what cached CUDA graphs hold = 5242880 "
                            + "(expected 0)")
                    .contains("cuda:0: 7340032 B = 4194304 B in 2 stream workspaces (2097152 B of them captured by "
                            + "CUDA graphs) + 2097152 B in cached CUDA graphs (not counted) + 1048576 B held by "
                            + "nothing the server accounts for")
                    .contains("gpupool.kernels.workspace-release-after-idle")
                    .contains("a leak or a request still running"));
        } finally {
            server.stop(0);
        }
    }

    /** A server that is gone is not hammered: each client backs off between failed connections. */
    @Test
    void clientsBackOffWhileTheServerIsUnreachable() throws Exception {
        int port = FreePorts.pick();
        LoadDriver.Options options = LoadDriver.parse("--url", "http://127.0.0.1:" + port, "--actuator", "none",
                "--duration", "2s", "--warmup", "0s", "--concurrency", "4", "--quiet", "--drain", "0s");
        JsonNode report = new LoadDriver(options, new PrintStream(new ByteArrayOutputStream())).run().report();
        // without a back-off each of the 4 clients retries at once, thousands of times a second
        assertThat(report.get("requests").asLong()).isBetween(4L, 80L);
    }

    @Test
    void toolPortsLieOutsideTheEphemeralRange() throws Exception {
        for (int i = 0; i < 20; i++) {
            int port = FreePorts.pick();
            assertThat(port).isBetween(FreePorts.LOWEST, FreePorts.HIGHEST);
            assertThat(port < 32768 || port > 60999).isTrue();
        }
    }

    /** Open loop: requests are issued at the given rate whatever the answers, and none is skipped here. */
    @Test
    void openLoopIssuesAtTheGivenRate() throws Exception {
        HttpServer server = HttpServer.create(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0), 0);
        server.createContext("/", exchange -> {
            exchange.getRequestBody().readAllBytes();
            exchange.sendResponseHeaders(200, -1);
            exchange.close();
        });
        server.start();
        try {
            LoadDriver.Options options = LoadDriver.parse("--url", "http://127.0.0.1:" + server.getAddress().getPort(),
                    "--actuator", "none", "--rate", "50", "--duration", "2s", "--warmup", "0s", "--quiet",
                    "--drain", "0s");
            JsonNode report = new LoadDriver(options, new PrintStream(new ByteArrayOutputStream())).run().report();
            assertThat(report.get("requests").asLong()).isEqualTo(100);
            assertThat(report.get("skipped").asLong()).isZero();
            assertThat(report.get("options").get("rate").asDouble()).isEqualTo(50.0);
        } finally {
            server.stop(0);
        }
    }

    /**
     * The comparison table: ratios against DIRECT, peak reserved and peak allocated for every mode that
     * lists its devices (pool or not), n/a for a run whose endpoint could not be read, and failed modes.
     */
    @Test
    void comparisonTableGivesRatiosAgainstDirectAndMemoryForEveryListedMode() {
        JsonNode combined = json.readTree("""
                {"backend":"cuda","started_at":"t","modes":[
                  {"mode":"TWO_LEVEL","throughput_rps":230,"p50_ms":1,"p90_ms":2,"p99_ms":9,"p99.9_ms":10,
                   "requests":100,"ok":100,"unexpected_5xx":0,"pool_listed":true,
                   "pool_peak_reserved_bytes":1073741824,"pool_peak_allocated_bytes":805306368,
                   "allocated_after_drain_bytes":0,"ready_after":200},
                  {"mode":"DIRECT","throughput_rps":200,"p50_ms":1,"p90_ms":2,"p99_ms":10,"p99.9_ms":11,
                   "requests":90,"ok":88,"unexpected_5xx":0,"pool_listed":true,
                   "pool_peak_reserved_bytes":734003200,"pool_peak_allocated_bytes":734003200,
                   "allocated_after_drain_bytes":0,"ready_after":200},
                  {"mode":"BEST_FIT","throughput_rps":100,"p50_ms":1,"p90_ms":2,"p99_ms":20,"p99.9_ms":21,
                   "requests":50,"ok":50,"unexpected_5xx":0,"pool_listed":false,
                   "pool_error":"GET /actuator/gpupool answered 503","ready_after":200},
                  {"mode":"CUDA_ASYNC","error":"server exited with status 1 before it was ready"}]}""");
        AllocatorComparison.addRatios((tools.jackson.databind.node.ArrayNode) combined.get("modes"));
        assertThat(combined.get("modes").get(0).get("throughput_vs_direct").asDouble()).isEqualTo(1.15);
        assertThat(combined.get("modes").get(0).get("p99_vs_direct").asDouble()).isEqualTo(0.9);
        String table = AllocatorComparison.markdown(combined);
        assertThat(table).contains("| pool peak reserved | pool peak allocated | allocated after drain |")
                .contains("| TWO_LEVEL | 230.0 | 1.00 | 2.00 | 9.00 | 10.00 | 1.15 | 0.90 | 0 | 0 | 1024 MiB | 768 MiB | 0 B | 200 |")
                .contains("| DIRECT | 200.0 | 1.00 | 2.00 | 10.00 | 11.00 | 1.00 | 1.00 | 2 | 0 | 700 MiB | 700 MiB | 0 B | 200 |")
                .contains("| BEST_FIT | 100.0 | 1.00 | 2.00 | 20.00 | 21.00 | 0.50 | 2.00 | 0 | 0 | n/a (not read) | n/a | n/a | 200 |")
                .contains("| CUDA_ASYNC | failed: server exited with status 1 before it was ready |||||||||||||");
        assertThat(table.lines().filter(line -> line.startsWith("| CUDA_ASYNC")).findFirst().orElseThrow()
                .chars().filter(c -> c == '|').count())
                .as("a failed mode's row has as many cells as the header")
                .isEqualTo(table.lines().filter(line -> line.startsWith("| mode")).findFirst().orElseThrow()
                        .chars().filter(c -> c == '|').count());
    }

    /** Memory a cached CUDA graph holds is not undrained; anything else allocated after the run is. */
    @Test
    void theDrainCheckLeavesOutWhatCachedGraphsHoldAndCountsEverythingElse() {
        JsonNode summary = json.readTree("""
                {"devices":{"cuda:0":{"allocatedBytes":5000,"graphBytes":5000},
                            "cuda:1":{"allocatedBytes":300,"graphBytes":100},
                            "host:0":{"allocatedBytes":64}}}""");
        assertThat(LoadDriver.allocatedBytes(summary)).isEqualTo(200 + 64);
    }

    /** A row sums the peaks of every listed device; an unreadable endpoint leaves it unlisted with the reason. */
    @Test
    void comparisonRowSumsThePeaksOfEveryDeviceOrKeepsWhyTheEndpointWasNotRead() {
        JsonNode report = json.readTree("""
                {"throughput_rps":10,"latency_ms":{"p50":1},"requests":5,"status":{"200":5},"ready_after":200,
                 "pool_after":{"devices":{
                   "cuda:0":{"mode":"CUDA_ASYNC","peakReservedBytes":3000,"peakAllocatedBytes":1000,"allocatedBytes":0},
                   "cuda:1":{"mode":"CUDA_ASYNC","peakReservedBytes":500,"peakAllocatedBytes":200,"allocatedBytes":0}}},
                 "pool_after_drain":{"devices":{"cuda:0":{"allocatedBytes":0},"cuda:1":{"allocatedBytes":256}}}}""");
        tools.jackson.databind.node.ObjectNode row = json.createObjectNode();
        AllocatorComparison.fillRow(row, report);
        assertThat(row.get("pool_listed").asBoolean()).isTrue();
        assertThat(row.get("pool_peak_reserved_bytes").asLong()).isEqualTo(3500);
        assertThat(row.get("pool_peak_allocated_bytes").asLong()).isEqualTo(1200);
        assertThat(row.get("allocated_after_drain_bytes").asLong()).isEqualTo(256);
        assertThat(row.has("pool_error")).isFalse();

        tools.jackson.databind.node.ObjectNode unread = json.createObjectNode();
        AllocatorComparison.fillRow(unread, json.readTree("""
                {"pool_after":{"error":"GET /actuator/gpupool failed: connection refused"},"pool_after_drain":{}}"""));
        assertThat(unread.get("pool_listed").asBoolean()).isFalse();
        assertThat(unread.get("pool_error").asString()).contains("connection refused");
    }

    /** Several rounds: ratios within each round, and a summary of median, lowest and highest per mode. */
    @Test
    void roundsAreComparedWithinEachRoundAndSummarised() {
        JsonNode combined = json.readTree("""
                {"backend":"cuda","started_at":"t","rounds":3,"modes":[
                  {"mode":"TWO_LEVEL","round":1,"throughput_rps":99,"p99_ms":280,"requests":1,"ok":1,"pool_listed":true,
                   "pool_peak_reserved_bytes":943718400},
                  {"mode":"CUDA_ASYNC","round":1,"throughput_rps":100,"p99_ms":260,"requests":1,"ok":1},
                  {"mode":"CUDA_ASYNC","round":2,"throughput_rps":96,"p99_ms":270,"requests":1,"ok":1},
                  {"mode":"TWO_LEVEL","round":2,"throughput_rps":97,"p99_ms":290,"requests":1,"ok":1,"pool_listed":true,
                   "pool_peak_reserved_bytes":838860800},
                  {"mode":"TWO_LEVEL","round":3,"throughput_rps":101,"p99_ms":270,"requests":1,"ok":1,"pool_listed":true,
                   "pool_peak_reserved_bytes":1048576000},
                  {"mode":"CUDA_ASYNC","round":3,"throughput_rps":100,"p99_ms":250,"requests":1,"ok":1}]}""");
        tools.jackson.databind.node.ArrayNode rows = (tools.jackson.databind.node.ArrayNode) combined.get("modes");
        AllocatorComparison.addRatios(rows);
        assertThat(rows.get(0).get("throughput_vs_cuda_async").asDouble()).isEqualTo(0.99);
        assertThat(rows.get(3).get("throughput_vs_cuda_async").asDouble()).as("against round 2's 96, not round 3's")
                .isEqualTo(1.01);
        tools.jackson.databind.node.ArrayNode summary = AllocatorComparison.summarize(rows, java.util.List.of("TWO_LEVEL", "CUDA_ASYNC"));
        ((tools.jackson.databind.node.ObjectNode) combined).set("summary", summary);
        JsonNode twoLevel = summary.get(0);
        assertThat(twoLevel.get("runs").asInt()).isEqualTo(3);
        assertThat(twoLevel.get("throughput_rps_median").asDouble()).isEqualTo(99.0);
        assertThat(twoLevel.get("throughput_rps_min").asDouble()).isEqualTo(97.0);
        assertThat(twoLevel.get("throughput_vs_cuda_async_median").asDouble()).isEqualTo(1.01);
        assertThat(twoLevel.get("throughput_vs_cuda_async_min").asDouble()).isEqualTo(0.99);
        assertThat(twoLevel.has("throughput_vs_direct_median")).as("no DIRECT ran").isFalse();
        assertThat(AllocatorComparison.markdown(combined))
                .contains("| TWO_LEVEL (round 2) | 97.0 |")
                .contains("Over 3 rounds")
                .contains("| TWO_LEVEL | 3 | 99.0 (97.0–101.0) | - | 1.010 (0.990–1.010) | 280.0 | 900 (800–1000) |")
                .contains("| CUDA_ASYNC | 3 | 100.0 (96.0–100.0) | - | 1.000 (1.000–1.000) | 260.0 | - |");
    }

    /** A variant with many indexed settings still gets a file name the file system takes, and one of its own. */
    @Test
    void longVariantLabelsGiveShortDistinctFileNames() {
        StringBuilder ladder = new StringBuilder("TWO_LEVEL+gpupool.kernels.graphs.enabled=true");
        for (int i = 0; i < 8; i++) {
            ladder.append("+gpupool.kernels.graphs.batch-buckets[").append(i).append("]=").append(1 << i);
        }
        String one = AllocatorComparison.Variant.parse(ladder.toString()).fileName();
        String other = AllocatorComparison.Variant.parse(ladder + "+gpupool.kernels.graphs.max-bytes=8GB").fileName();
        assertThat(("server-" + one + "-r10.log").getBytes(java.nio.charset.StandardCharsets.UTF_8).length).isLessThan(255);
        assertThat(one).startsWith("TWO_LEVEL_gpupool.kernels.graphs.enabled_true_").matches("[A-Za-z0-9._-]+");
        assertThat(other).isNotEqualTo(one);
    }

    /** A --modes entry may carry server settings and is then a variant of its own, named by the whole entry. */
    @Test
    void modeVariantsCarryServerSettingsAndBadEntriesAreRefusedByName() {
        AllocatorComparison.Variant plain = AllocatorComparison.Variant.parse(" CUDA_ASYNC ");
        assertThat(plain.label()).isEqualTo("CUDA_ASYNC");
        assertThat(plain.settings()).isEmpty();
        AllocatorComparison.Variant slack = AllocatorComparison.Variant.parse(
                "TWO_LEVEL+gpupool.memory.mapped-slack=0.25+gpupool.memory.local-idle-age=2s");
        assertThat(slack.mode()).isEqualTo("TWO_LEVEL");
        assertThat(slack.settings()).containsExactly("gpupool.memory.mapped-slack=0.25",
                "gpupool.memory.local-idle-age=2s");
        assertThat(slack.fileName()).isEqualTo("TWO_LEVEL_gpupool.memory.mapped-slack_0.25_gpupool.memory.local-idle-age_2s");
        assertThat(slack.jvmSettings()).isEmpty();
        AllocatorComparison.Variant jvm = AllocatorComparison.Variant.parse("GLOBAL_ONLY+-Dgpupool.example=1+gpupool.a=b");
        assertThat(jvm.jvmSettings()).containsExactly("-Dgpupool.example=1");
        assertThat(jvm.serverSettings()).containsExactly("gpupool.a=b");
        assertThatThrownBy(() -> AllocatorComparison.Variant.parse("TWO_LEVLE"))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("unknown allocator mode 'TWO_LEVLE'");
        assertThatThrownBy(() -> AllocatorComparison.Variant.parse("TWO_LEVEL+slack"))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("setting 'slack' is not key=value");
    }
}
