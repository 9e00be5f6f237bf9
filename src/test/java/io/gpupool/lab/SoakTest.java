package io.gpupool.lab;

import io.gpupool.GpuPoolApplication;
import io.gpupool.config.FaultInjection;
import io.gpupool.config.TensorOpsCustomizer;
import io.gpupool.kernels.StreamWorkspaces;
import io.gpupool.serving.DeviceRuntime;
import io.gpupool.serving.ModelRegistry;
import io.gpupool.serving.ServingDevices;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.context.TypeExcludeFilter;
import org.springframework.boot.context.properties.ConfigurationPropertiesScan;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.web.server.LocalManagementPort;
import org.springframework.boot.test.web.server.LocalServerPort;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.ComponentScan;
import org.springframework.context.annotation.FilterType;
import tools.jackson.databind.JsonNode;

import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Base64;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.LongAdder;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The short soak (issue 8), in the default build: the whole application on the host backend, a
 * random port, the shipped models, and for 25 s a mix of BERT and MLP requests (some with binary
 * tensor data) interleaved with the malformed corpus (15 %), clients that hang up mid-request (5 %),
 * injected device out-of-memory on chunk requests, and an operator trimming the pool every 250 ms
 * (so that the pool keeps going back to the device for chunks, where the faults are injected). The
 * host kernels take a pool block per stream for their products as cuBLASLt does on CUDA
 * ({@link WorkspaceTakingOps}), given back by the trims and once the server was idle for 1 s.
 *
 * <p>Expected, and asserted: no 5xx other than the deliberate 503/504/507; every request answered
 * (the server's own timeout is 10 s, the client waits 20 s), none only after a resend on a fresh connection
 * (a kept-alive connection the server stopped reading); the pool's allocated bytes back to zero
 * afterwards, stream workspaces included; the server still ready and answering. Timings are not asserted.
 *
 * <p>The injection rate here is 20 % of chunk requests, not the 1 % of a long soak
 * ({@code tools/soak.sh}), so that a 25 s run surely injects some. Mapped extents are one 2 MiB unit:
 * a trim unmaps only whole free extents, and with the default 8 MiB ones this small load's partly used
 * extents stay mapped, so the pool would hardly go back to the device where the faults are injected.
 */
@Tag("soak")
@SpringBootTest(classes = SoakTest.Application.class, webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT,
        properties = {"gpupool.backend=host", "management.server.port=0",
                "gpupool.memory.fault-injection.probability=0.2", "gpupool.memory.fault-injection.seed=8",
                "gpupool.security.operator-password=" + SoakTest.OPERATOR_PASSWORD,
                "gpupool.serving.streams-per-device=2", "gpupool.serving.queue-capacity=16",
                "gpupool.serving.default-timeout=10s", "gpupool.kernels.workspace-release-after-idle=1s",
                "gpupool.memory.mapped-extent-bytes=2MB"})
class SoakTest {

    static final String OPERATOR_PASSWORD = "soak-test-operator";

    /** {@link GpuPoolApplication} as it ships, without other test suites' own configurations. */
    @SpringBootConfiguration
    @EnableAutoConfiguration
    @ConfigurationPropertiesScan(basePackageClasses = GpuPoolApplication.class)
    @ComponentScan(basePackageClasses = GpuPoolApplication.class, excludeFilters = {
            @ComponentScan.Filter(type = FilterType.CUSTOM, classes = TypeExcludeFilter.class),
            @ComponentScan.Filter(type = FilterType.ANNOTATION, classes = SpringBootConfiguration.class)})
    static class Application {

        /** Host kernels that take a 1 MiB pool block per stream for their products, as cuBLASLt does on CUDA. */
        @Bean
        TensorOpsCustomizer workspaceTakingKernels() {
            return (device, ops, activations) -> WorkspaceTakingOps.over(ops, activations, WORKSPACE_BYTES);
        }
    }

    static final long WORKSPACE_BYTES = 1L << 20;

    @LocalServerPort
    int port;

    @LocalManagementPort
    int managementPort;

    @Autowired
    ModelRegistry registry;

    @Autowired
    ServingDevices devices;

    @Autowired
    FaultInjection faults;

    private final HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();

    @Test
    void survivesFaultsCancellationsAndMalformedRequestsAndGivesEveryByteBack() throws Exception {
        long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
        while (!registry.isWarmedUp()) {
            assertThat(System.nanoTime()).as("warm-up finished within 60 s").isLessThan(deadline);
            Thread.sleep(50);
        }

        AtomicBoolean trimming = new AtomicBoolean(true);
        Map<Integer, LongAdder> trimStatuses = new ConcurrentHashMap<>();
        Thread trimmer = Thread.ofPlatform().name("soak-trimmer").start(() -> {
            while (trimming.get()) {
                trimStatuses.computeIfAbsent(trim(), k -> new LongAdder()).increment();
                try {
                    Thread.sleep(250);
                } catch (InterruptedException e) {
                    return;
                }
            }
        });
        LoadDriver.Result result;
        try {
            LoadDriver.Options options = LoadDriver.parse("--url", "http://127.0.0.1:" + port,
                    "--actuator", "http://127.0.0.1:" + managementPort, "--mix", "bert=3,mlp=1", "--binary", "0.3",
                    "--malformed", "0.15", "--cancel", "0.05", "--concurrency", "6", "--duration", "25s",
                    "--warmup", "0s", "--drain", "30s", "--timeout", "20s", "--label", "soak (CI)", "--out", "target/soak/soak.json",
                    "--quiet");
            result = new LoadDriver(options, System.out).run();
            result.write(options);
        } finally {
            trimming.set(false);
            trimmer.join();
        }
        JsonNode report = result.report();
        System.out.println(result.summaryLine() + "; injected faults " + faults.injectedFailures() + " of "
                + faults.chunkRequests() + " chunk requests; trims " + trimStatuses + "; answered after a retry "
                + report.get("answered_after_retry"));

        assertThat(result.unexpected5xx()).as("5xx other than 503/504/507, by request: %s, first answers: %s",
                report.get("unexpected"), report.get("first_answers")).isZero();
        assertThat(report.get("unanswered").isEmpty())
                .as("every request answered within the server's 10 s timeout; unanswered by request: %s",
                        report.get("unanswered")).isTrue();
        assertThat(report.get("answered_after_retry").isEmpty())
                .as("no kept-alive connection stopped being read (answered only on a fresh connection: %s)",
                        report.get("answered_after_retry")).isTrue();
        assertThat(result.allocatedAfterDrain()).as("pool allocated bytes after the drain: %s",
                LoadDriver.heldAfterDrain(report.path("pool_after_drain"))).isZero();
        for (DeviceRuntime device : devices.devices()) {
            StreamWorkspaces workspaces = device.ops().workspaces().orElseThrow();
            assertThat(workspaces.heldBytes()).as("device %d stream workspaces after the drain", device.index())
                    .isZero();
            assertThat(workspaces.releases()).as("workspaces given back (trims and the idle release)").isPositive();
        }
        assertThat(report.path("pool_after_drain").path("devices").properties()).isNotEmpty().allSatisfy(device ->
                assertThat(device.getValue().path("workspaceReleases").asLong())
                        .as("the drain read the kernels' workspaces from /actuator/gpupool").isPositive());
        for (DeviceRuntime device : devices.devices()) {
            assertThat(device.allocator().metrics().allocatedBytes()).as("device %d allocated bytes", device.index())
                    .isZero();
            assertThat(device.allocator().metrics().counters().allocations())
                    .isEqualTo(device.allocator().metrics().counters().frees());
        }
        assertThat(result.readyAfter()).as("/v2/health/ready after the soak").isEqualTo(200);
        // with 20 % of map calls still failing, one inference may get a deliberate 507 (it needs several
        // maps after the last trim); the check is that the server serves once the faults stop
        faults.disarm();
        assertThat(infer()).as("an inference after the soak").isEqualTo(200);

        // The run exercised what it claims to.
        JsonNode statuses = report.get("status");
        assertThat(statuses.path("200").asLong()).as("answered requests").isPositive();
        assertThat(statuses.path("400").asLong()).as("refused malformed requests").isPositive();
        assertThat(statuses.path("cancelled").asLong()).as("abandoned requests").isPositive();
        assertThat(faults.injectedFailures()).as("injected out-of-memory failures").isPositive();
        assertThat(trimStatuses).as("operator trims").containsOnlyKeys(200);
    }

    private int trim() {
        String credential = Base64.getEncoder().encodeToString(("operator:" + OPERATOR_PASSWORD)
                .getBytes(StandardCharsets.UTF_8));
        try {
            return http.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + managementPort + "/actuator/gpupool"))
                    .header("Authorization", "Basic " + credential).timeout(Duration.ofSeconds(10)).DELETE().build(),
                    HttpResponse.BodyHandlers.discarding()).statusCode();
        } catch (Exception e) {
            return -1;
        }
    }

    private int infer() throws Exception {
        String body = """
                {"inputs": [{"name": "input", "datatype": "FP32", "shape": [2, 4],
                             "data": [5.1, 3.5, 1.4, 0.2, 6.7, 3.0, 5.2, 2.3]}]}""";
        return http.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + "/v2/models/iris-mlp/infer"))
                .header("Content-Type", "application/json").timeout(Duration.ofSeconds(30))
                .POST(HttpRequest.BodyPublishers.ofString(body)).build(), HttpResponse.BodyHandlers.discarding())
                .statusCode();
    }
}
