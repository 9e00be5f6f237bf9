package io.gpupool.serving;

import io.micrometer.core.instrument.MeterRegistry;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.web.server.LocalServerPort;
import org.springframework.boot.webtestclient.autoconfigure.AutoConfigureWebTestClient;
import org.springframework.http.MediaType;
import org.springframework.test.web.reactive.server.WebTestClient;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.json.JsonMapper;

import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.Socket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.zip.GZIPInputStream;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * What existing clients notice over a real server (the whole application, host backend, shipped
 * models): text in and an embedding out, compressed answers, a 413 a whole-body writer can read,
 * and the statistics as meters. Same configuration as {@link ServingApplicationTest}, so the two
 * share one application context.
 */
@SpringBootTest(classes = ServingApplicationTest.Application.class,
        webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT, properties = {"gpupool.backend=host", "gpupool.serving.max-batch-size=16"})
@AutoConfigureWebTestClient
class ClientCompatibilityApplicationTest {

    private static final JsonMapper JSON = JsonMapper.builder().build();

    @Autowired
    WebTestClient client;

    @Autowired
    ModelRegistry registry;

    @Autowired
    MeterRegistry meters;

    @LocalServerPort
    int port;

    @BeforeEach
    void waitForWarmUp() {
        long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
        while (!registry.isWarmedUp()) {
            assertThat(System.nanoTime()).as("warm-up finished within 60 s").isLessThan(deadline);
            ServingApplicationTest.sleepBriefly();
        }
    }

    @Test
    void textInGivesTheEmbeddingOfItsTokens() throws IOException {
        client.get().uri("/v2/models/tiny-bert").exchange().expectStatus().isOk().expectBody()
                .jsonPath("$.inputs[?(@.name=='text')].datatype").isEqualTo("BYTES")
                .jsonPath("$.inputs[?(@.name=='text')].shape[0]").isEqualTo(-1);
        JsonNode fromText = infer("""
                {"inputs": [{"name": "text", "shape": [2], "datatype": "BYTES", "data": ["hello world", "Hello, World!"]}],
                 "outputs": [{"name": "pooler_output"}]}""");
        // transformers' tokens for the two texts (fixtures/tiny-bert/tokens.json), padded as transformers pads
        JsonNode fromIds = infer("""
                {"inputs": [
                  {"name": "input_ids", "shape": [2, 6], "datatype": "INT64", "data": [2, 77, 78, 3, 0, 0, 2, 77, 6, 78, 7, 3]},
                  {"name": "attention_mask", "shape": [2, 6], "datatype": "INT64", "data": [1, 1, 1, 1, 0, 0, 1, 1, 1, 1, 1, 1]},
                  {"name": "token_type_ids", "shape": [2, 6], "datatype": "INT64", "data": [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]}],
                 "outputs": [{"name": "pooler_output"}]}""");
        JsonNode embedding = fromText.get("outputs").get(0);
        assertThat(embedding.get("shape").toString()).isEqualTo("[2,32]");
        assertThat(embedding.get("data")).isEqualTo(fromIds.get("outputs").get(0).get("data"));
        client.post().uri("/v2/models/tiny-bert/infer").contentType(MediaType.APPLICATION_JSON).bodyValue("""
                {"inputs": [{"name": "text", "shape": [1], "datatype": "BYTES", "data": ["hi"]},
                            {"name": "input_ids", "shape": [1, 2], "datatype": "INT64", "data": [2, 3]}]}""")
                .exchange().expectStatus().isBadRequest().expectBody().jsonPath("$.error")
                .value(message -> assertThat((String) message).contains("either 'text' or the token inputs"));
    }

    @Test
    void answersAreCompressedForAClientThatAsks() throws Exception {
        String body = """
                {"inputs": [{"name": "text", "shape": [3], "datatype": "BYTES",
                  "data": ["hello world", "the gpu pool", "embedding texts in and out"]}]}""";
        HttpClient http = HttpClient.newHttpClient();
        HttpRequest.Builder request = HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + "/v2/models/tiny-bert/infer"))
                .header("Content-Type", "application/json").POST(HttpRequest.BodyPublishers.ofString(body));
        HttpResponse<byte[]> gzipped = http.send(request.copy().header("Accept-Encoding", "gzip").build(),
                HttpResponse.BodyHandlers.ofByteArray());
        HttpResponse<byte[]> plain = http.send(request.build(), HttpResponse.BodyHandlers.ofByteArray());
        assertThat(gzipped.statusCode()).isEqualTo(200);
        assertThat(gzipped.headers().firstValue("Content-Encoding")).hasValue("gzip");
        assertThat(plain.headers().firstValue("Content-Encoding")).isEmpty();
        byte[] inflated;
        try (InputStream in = new GZIPInputStream(new ByteArrayInputStream(gzipped.body()))) {
            inflated = in.readAllBytes();
        }
        assertThat(gzipped.body().length).isLessThan(plain.body().length);
        assertThat(JSON.readTree(inflated)).isEqualTo(JSON.readTree(plain.body()));
    }

    @Test
    void aClientWritingAnOversizedBodyWholeReadsThe413() throws IOException {
        int limit = 64 * 1024 * 1024;   // gpupool.serving.max-body-size default
        int size = limit + 1024 * 1024;
        try (Socket socket = new Socket("127.0.0.1", port)) {
            socket.setSoTimeout(60_000);
            OutputStream out = socket.getOutputStream();
            out.write(("POST /v2/models/iris-mlp/infer HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                    + "Content-Length: " + size + "\r\n\r\n").getBytes(StandardCharsets.US_ASCII));
            byte[] chunk = new byte[1 << 20];
            java.util.Arrays.fill(chunk, (byte) ' ');
            for (int written = 0; written < size; written += chunk.length) {
                out.write(chunk, 0, Math.min(chunk.length, size - written));   // a reset would throw here
            }
            out.flush();
            String answer = new String(socket.getInputStream().readNBytes(512), StandardCharsets.ISO_8859_1);
            assertThat(answer).startsWith("HTTP/1.1 413").contains("exceeds the limit of " + limit + " bytes");
        }
    }

    /** A client that asks before sending (Expect: 100-continue) a body declared over the limit is told 413 first. */
    @Test
    void aClientAskingToSendAnOversizedBodyGets413InsteadOf100Continue() throws IOException {
        int limit = 64 * 1024 * 1024;   // gpupool.serving.max-body-size default
        try (Socket socket = new Socket("127.0.0.1", port)) {
            socket.setSoTimeout(10_000);
            socket.getOutputStream().write(("POST /v2/models/iris-mlp/infer HTTP/1.1\r\nHost: localhost\r\n"
                    + "Content-Type: application/json\r\nExpect: 100-continue\r\nContent-Length: " + (limit + 1)
                    + "\r\n\r\n").getBytes(StandardCharsets.US_ASCII));
            InputStream in = socket.getInputStream();
            StringBuilder head = new StringBuilder();
            while (!head.toString().endsWith("\r\n\r\n")) {
                int next = in.read();                          // the answer's head, then its body by its length
                assertThat(next).as("the connection closed after %s", head).isNotNegative();
                head.append((char) next);
            }
            assertThat(head.toString()).as("no 100 Continue first").startsWith("HTTP/1.1 413");
            int length = Integer.parseInt(head.toString().replaceAll("(?is).*content-length: *([0-9]+).*", "$1"));
            String answer = head + new String(in.readNBytes(length), StandardCharsets.UTF_8);
            assertThat(answer).startsWith("HTTP/1.1 413").contains("exceeds the limit of " + limit + " bytes");
        }
    }

    @Test
    void statisticsAreMeters() {
        double before = counter("gpupool.model.inferences", "iris-mlp");
        client.post().uri("/v2/models/iris-mlp/infer").contentType(MediaType.APPLICATION_JSON).bodyValue("""
                {"inputs": [{"name": "input", "shape": [2, 4], "datatype": "FP32", "data": [5.1, 3.5, 1.4, 0.2, 6.7, 3.0, 5.2, 2.3]}]}""")
                .exchange().expectStatus().isOk();
        assertThat(counter("gpupool.model.inferences", "iris-mlp")).isEqualTo(before + 2);
        assertThat(meters.get("gpupool.model.time").tag("model", "iris-mlp").tag("phase", "compute_infer")
                .functionTimer().count()).isPositive();
        assertThat(meters.get("gpupool.model.memory").tag("model", "tiny-bert").tag("kind", "weights").gauge().value())
                .as("tiny-bert's weights on the device").isPositive();
        client.get().uri("/v2/models/tiny-bert/stats").exchange().expectStatus().isOk().expectBody()
                .jsonPath("$.model_stats[0].gpupool_memory.weights_bytes").value(bytes -> assertThat(((Number) bytes)
                        .doubleValue()).isEqualTo(meters.get("gpupool.model.memory").tag("model", "tiny-bert")
                        .tag("kind", "weights").gauge().value()))
                .jsonPath("$.model_stats[0].memory_usage[0].type").isEqualTo("CPU");
    }

    private double counter(String name, String model) {
        return meters.get(name).tag("model", model).functionCounter().count();
    }

    private JsonNode infer(String json) throws IOException {
        byte[] body = client.post().uri("/v2/models/tiny-bert/infer").contentType(MediaType.APPLICATION_JSON)
                .bodyValue(json).exchange().expectStatus().isOk().expectBody().returnResult().getResponseBody();
        return JSON.readTree(body);
    }
}
