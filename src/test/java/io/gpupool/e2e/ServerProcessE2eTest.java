package io.gpupool.e2e;

import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.json.JsonMapper;

import java.io.File;
import java.io.IOException;
import java.io.OutputStream;
import java.net.Socket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.jar.JarFile;
import java.util.jar.Manifest;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Starts the real server as its own process (host backend, the shipped models, the default pool),
 * drives concurrent inference of random sizes with some clients hanging up mid-request, and then
 * checks through the pool endpoint that every byte the requests allocated came back.
 */
@Tag("e2e")
class ServerProcessE2eTest {

    private static final JsonMapper JSON = JsonMapper.builder().build();
    private static final Duration STARTUP = Duration.ofSeconds(180);

    private static Process server;
    private static int port;
    private static int managementPort;
    private static Path log;
    private static final HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();

    @BeforeAll
    static void startServer() throws Exception {
        port = freePort();
        managementPort = freePort();
        log = Path.of("target", "e2e-server.log");
        Files.createDirectories(log.getParent());
        List<String> command = List.of(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "--enable-native-access=ALL-UNNAMED", "-Xmx512m",
                "-cp", applicationClassPath(), "io.gpupool.GpuPoolApplication",
                "--server.port=" + port, "--management.server.port=" + managementPort,
                "--gpupool.backend=host", "--gpupool.models.path=models",
                "--gpupool.serving.streams-per-device=4", "--gpupool.serving.queue-capacity=1000");
        server = new ProcessBuilder(command).redirectErrorStream(true).redirectOutput(log.toFile()).start();
        long deadline = System.nanoTime() + STARTUP.toNanos();
        while (true) {
            assertThat(server.isAlive()).as("server process alive (see %s)", log).isTrue();
            assertThat(System.nanoTime()).as("server ready within %s (see %s)", STARTUP, log).isLessThan(deadline);
            try {
                if (get("/v2/health/ready", port).statusCode() == 200) {
                    break;
                }
            } catch (IOException notYetListening) {
                // keep waiting
            }
            Thread.sleep(250);
        }
    }

    @AfterAll
    static void stopServer() throws Exception {
        if (server != null) {
            server.destroy(); // SIGTERM: Spring closes the workers, models and pools
            if (!server.waitFor(Duration.ofSeconds(30))) {
                server.destroyForcibly();
            }
        }
    }

    @Test
    void concurrentVariableSizeRequestsWithCancellationsGiveEveryByteBack() throws Exception {
        Random random = new Random(7);
        ExecutorService clients = Executors.newFixedThreadPool(16);
        List<Future<Integer>> answered = new ArrayList<>();
        int cancelled = 0;
        for (int i = 0; i < 160; i++) {
            boolean bert = random.nextBoolean();
            String model = bert ? "tiny-bert" : "iris-mlp";
            String body = bert ? bertRequest(random, 1 + random.nextInt(8), 1 + random.nextInt(64))
                    : irisRequest(random, 1 + random.nextInt(64)); // 64: gpupool.serving.max-batch-size
            if (i % 5 == 4) {
                cancelled++;
                int hangUpAfterMillis = random.nextInt(20);
                answered.add(clients.submit(() -> hangUp(model, body, hangUpAfterMillis)));
            } else {
                answered.add(clients.submit(() -> {
                    HttpResponse<String> response = post("/v2/models/" + model + "/infer", body);
                    assertThat(response.statusCode()).as("%s answered %s", model, response.body()).isEqualTo(200);
                    return 200;
                }));
            }
        }
        int ok = 0;
        for (Future<Integer> result : answered) {
            int status = result.get();
            if (status == 200) {
                ok++;
            } else {
                assertThat(status).as("answered requests succeed, cancelled ones report -1").isEqualTo(-1);
            }
        }
        clients.shutdown();
        assertThat(ok).isEqualTo(160 - cancelled);

        // Cancelled requests may still be computing; when the queues drain, every byte must be back.
        long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
        JsonNode devices;
        while (true) {
            devices = JSON.readTree(get("/actuator/gpupool", managementPort).body()).get("devices");
            assertThat(devices.size()).as("pools reported by /actuator/gpupool").isPositive();
            long allocated = 0;
            for (JsonNode device : devices) {
                allocated += device.get("global").get("allocatedBytes").asLong();
            }
            if (allocated == 0) {
                break;
            }
            assertThat(System.nanoTime()).as("allocated bytes back to 0, last read %s", devices).isLessThan(deadline);
            Thread.sleep(200);
        }
        for (JsonNode device : devices) {
            assertThat(device.get("global").get("peakAllocatedBytes").asLong())
                    .as("the requests did allocate from the pool").isPositive();
            assertThat(device.get("counters").get("allocations").asLong())
                    .isEqualTo(device.get("counters").get("frees").asLong());
        }
        // Some hang-ups arrived while their request was still queued or running: the server saw them.
        JsonNode cancelledRequests = JSON.readTree(get("/actuator/metrics/gpupool.inference.requests?tag=outcome:cancelled",
                managementPort).body());
        double serverCancelled = cancelledRequests.get("measurements").get(0).get("value").asDouble();
        assertThat(serverCancelled).as("requests the server counted as cancelled by their client").isPositive();
        for (JsonNode device : devices) {
            System.out.printf("e2e %s: %d answered, %d hung up (%.0f cancelled on the server), peak allocated %d B, "
                            + "reserved %d B, allocations %d = frees %d%n", device.get("device").asString(), ok, cancelled,
                    serverCancelled, device.get("global").get("peakAllocatedBytes").asLong(),
                    device.get("global").get("reservedBytes").asLong(), device.get("counters").get("allocations").asLong(),
                    device.get("counters").get("frees").asLong());
        }
        // And the server still answers afterwards.
        assertThat(post("/v2/models/iris-mlp/infer", irisRequest(random, 3)).statusCode()).isEqualTo(200);
    }

    /** Sends the whole request on a raw socket, then closes it without reading: a client that went away. */
    private static int hangUp(String model, String body, int afterMillis) throws Exception {
        byte[] bytes = body.getBytes(StandardCharsets.UTF_8);
        try (Socket socket = new Socket("localhost", port)) {
            OutputStream out = socket.getOutputStream();
            out.write(("POST /v2/models/" + model + "/infer HTTP/1.1\r\nHost: localhost\r\n"
                    + "Content-Type: application/json\r\nContent-Length: " + bytes.length + "\r\n\r\n")
                    .getBytes(StandardCharsets.US_ASCII));
            out.write(bytes);
            out.flush();
            Thread.sleep(afterMillis);
            socket.setSoLinger(true, 0); // reset, not a polite close
        }
        return -1;
    }

    private static String bertRequest(Random random, int batch, int seq) {
        StringBuilder ids = new StringBuilder();
        StringBuilder mask = new StringBuilder();
        for (int i = 0; i < batch * seq; i++) {
            ids.append(i == 0 ? "" : ",").append(1 + random.nextInt(99));
            mask.append(i == 0 ? "" : ",").append(random.nextInt(10) == 0 ? 0 : 1);
        }
        return """
                {"inputs": [
                  {"name": "input_ids", "shape": [%d, %d], "datatype": "INT64", "data": [%s]},
                  {"name": "attention_mask", "shape": [%d, %d], "datatype": "INT64", "data": [%s]}]}"""
                .formatted(batch, seq, ids, batch, seq, mask);
    }

    private static String irisRequest(Random random, int batch) {
        StringBuilder data = new StringBuilder();
        for (int i = 0; i < batch * 4; i++) {
            data.append(i == 0 ? "" : ",").append(String.format(java.util.Locale.ROOT, "%.2f", 0.1 + 7 * random.nextDouble()));
        }
        return """
                {"inputs": [{"name": "input", "shape": [%d, 4], "datatype": "FP32", "data": [%s]}]}"""
                .formatted(batch, data);
    }

    private static HttpResponse<String> get(String path, int toPort) throws IOException, InterruptedException {
        return http.send(HttpRequest.newBuilder(URI.create("http://localhost:" + toPort + path))
                .timeout(Duration.ofSeconds(30)).GET().build(), HttpResponse.BodyHandlers.ofString());
    }

    private static HttpResponse<String> post(String path, String body) throws IOException, InterruptedException {
        return http.send(HttpRequest.newBuilder(URI.create("http://localhost:" + port + path))
                .timeout(Duration.ofSeconds(60)).header("Content-Type", "application/json")
                .POST(HttpRequest.BodyPublishers.ofString(body)).build(), HttpResponse.BodyHandlers.ofString());
    }

    private static int freePort() throws IOException {
        return io.gpupool.lab.FreePorts.pick();
    }

    /**
     * The main classes and runtime libraries this test runs with, without test classes. Surefire
     * starts tests through a manifest-only jar, so its Class-Path entries are expanded.
     */
    static String applicationClassPath() throws IOException {
        List<String> entries = new ArrayList<>();
        for (String entry : System.getProperty("java.class.path").split(File.pathSeparator)) {
            if (entry.contains("surefirebooter") && entry.endsWith(".jar")) {
                try (JarFile jar = new JarFile(entry)) {
                    Manifest manifest = jar.getManifest();
                    for (String url : manifest.getMainAttributes().getValue("Class-Path").split(" ")) {
                        if (!url.isBlank()) {
                            entries.add(Path.of(URI.create(url)).toString());
                        }
                    }
                }
            } else {
                entries.add(entry);
            }
        }
        return String.join(File.pathSeparator, entries.stream()
                .filter(entry -> !entry.replace('\\', '/').endsWith("test-classes")
                        && !entry.replace('\\', '/').endsWith("test-classes/"))
                .toList());
    }
}
