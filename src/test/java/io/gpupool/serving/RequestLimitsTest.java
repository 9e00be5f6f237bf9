package io.gpupool.serving;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.springframework.http.MediaType;
import org.springframework.core.io.buffer.DataBuffer;
import org.springframework.core.io.buffer.DefaultDataBufferFactory;
import org.springframework.web.reactive.function.BodyInserters;
import reactor.core.publisher.Sinks;
import java.io.ByteArrayOutputStream;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.zip.GZIPOutputStream;
import org.springframework.test.web.reactive.server.EntityExchangeResult;
import org.springframework.test.web.reactive.server.WebTestClient;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.hamcrest.Matchers.containsString;

/**
 * What a client may send and what it gets echoed back: every number ends as a valid value or a 400,
 * lenient shapes and data are refused, non-finite floats follow one rule in JSON and binary alike,
 * and nothing unbounded is echoed.
 */
class RequestLimitsTest {

    private ServingFixture fixture = ServingFixture.builder().maxBody(4096).build();

    @AfterEach
    void close() {
        fixture.close();
        clients.shutdownNow();
    }

    private WebTestClient.ResponseSpec infer(String model, String json) {
        return fixture.client.post().uri("/v2/models/" + model + "/infer").contentType(MediaType.APPLICATION_JSON)
                .bodyValue(json).exchange();
    }

    private WebTestClient.ResponseSpec inferBinary(String model, String json, byte[] binary) {
        byte[] header = json.getBytes(StandardCharsets.UTF_8);
        byte[] body = new byte[header.length + binary.length];
        System.arraycopy(header, 0, body, 0, header.length);
        System.arraycopy(binary, 0, body, header.length, binary.length);
        return fixture.client.post().uri("/v2/models/" + model + "/infer")
                .contentType(MediaType.APPLICATION_OCTET_STREAM)
                .header(InferenceHandler.HEADER_LENGTH, Integer.toString(header.length))
                .bodyValue(body).exchange();
    }

    private static void expectError(WebTestClient.ResponseSpec response, int status, String messagePart) {
        response.expectStatus().isEqualTo(status)
                .expectBody().jsonPath("$.error").value(containsString(messagePart));
    }

    private static byte[] floats(float... values) {
        ByteBuffer buffer = ByteBuffer.allocate(values.length * 4).order(ByteOrder.LITTLE_ENDIAN);
        for (float v : values) {
            buffer.putFloat(v);
        }
        return buffer.array();
    }

    private static byte[] halves(short... values) {
        ByteBuffer buffer = ByteBuffer.allocate(values.length * 2).order(ByteOrder.LITTLE_ENDIAN);
        for (short v : values) {
            buffer.putShort(v);
        }
        return buffer.array();
    }

    // ---- numbers the client sends ----

    @Test
    void aTimeoutTooLargeForADurationIs400NotAnOverflow() {
        expectError(infer("doubler", """
                {"parameters": {"timeout": 9223372036854776},
                 "inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP32", "data": [1, 2, 3, 4]}]}"""),
                400, "parameter 'timeout' must be at most 86400000000 microseconds");
        infer("doubler", """
                {"parameters": {"timeout": 86400000000},
                 "inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP32", "data": [1, 2, 3, 4]}]}""")
                .expectStatus().isOk();
        assertThat(fixture.model("doubler").invocations).hasValue(1);
    }

    @Test
    void nonFiniteBinaryFloatsAre400AsInJson() {
        String x = """
                {"inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP32", "parameters": {"binary_data_size": 16}}]}""";
        expectError(inferBinary("doubler", x, floats(1, Float.NaN, 3, 4)), 400,
                "input 'x': element 1 (NaN) is not a valid FP32 value (non-finite numbers are refused)");
        expectError(inferBinary("doubler", x, floats(1, 2, 3, Float.NEGATIVE_INFINITY)), 400,
                "input 'x': element 3 (-Infinity) is not a valid FP32 value");
        expectError(inferBinary("echo", """
                {"inputs": [{"name": "fp16", "shape": [2], "datatype": "FP16", "parameters": {"binary_data_size": 4}}]}""",
                halves((short) 0x3C00, (short) 0x7C00)), 400, "input 'fp16': element 1 (Infinity) is not a valid FP16 value");
        expectError(inferBinary("echo", """
                {"inputs": [{"name": "bf16", "shape": [1], "datatype": "BF16", "parameters": {"binary_data_size": 2}}]}""",
                halves((short) 0x7FC0)), 400, "input 'bf16': element 0 (NaN) is not a valid BF16 value");
        expectError(infer("doubler", """
                {"inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP32", "data": [1, 2, 3, 1e39]}]}"""),
                400, "element 3 (1.0E39) is not a valid FP32 value");
        assertThat(fixture.model("doubler").invocations).hasValue(0);
    }

    @Test
    void anOutputThatOverflowsToInfinityIs400InJsonAndBinaryAlike() {
        // 2 x 3e38 is beyond float range: the doubler's output is +Infinity
        expectError(infer("doubler", """
                {"inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP32", "data": [1, 2, 3, 3e38]}]}"""),
                400, "output 'y' holds a non-finite value at element 3");
        expectError(infer("doubler", """
                {"inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP32", "data": [1, 2, 3, 3e38]}],
                 "outputs": [{"name": "y", "parameters": {"binary_data": true}}]}"""),
                400, "output 'y' holds a non-finite value at element 3");
        assertThat(fixture.allocatedBytes()).isZero();
    }

    // ---- lenient shapes and data ----

    @Test
    void aDimensionGivenAsAStringIs400() {
        expectError(infer("doubler", """
                {"inputs": [{"name": "x", "shape": ["1", 4], "datatype": "FP32", "data": [1, 2, 3, 4]}]}"""),
                400, "malformed inference request JSON: inputs[0].shape[0] must be an integer");
        expectError(infer("doubler", """
                {"inputs": [{"name": 7, "shape": [1, 4], "datatype": "FP32", "data": [1, 2, 3, 4]}]}"""),
                400, "malformed inference request JSON: inputs[0].name must be a string");
        expectError(infer("doubler", "{\"inputs\": \"x\"}"), 400, "malformed inference request JSON: inputs must be an array");
        expectError(infer("doubler", """
                {"inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP32", "data": [1, 2, 3, 4]}], "parameters": [1]}"""),
                400, "malformed inference request JSON: parameters must be an object");
        for (String body : new String[] {"[]", "5", "\"x\""}) {
            infer("doubler", body).expectStatus().isBadRequest().expectBody().jsonPath("$.error")
                    .value(error -> assertThat(error.toString()).as(body)
                            .contains("malformed inference request JSON: the request body must be an object")
                            .doesNotContain("io.gpupool"));
        }
        assertThat(fixture.model("doubler").invocations).hasValue(0);
    }

    @Test
    void raggedNestedDataIs400EvenWhenTheElementCountFits() {
        expectError(infer("doubler", """
                {"inputs": [{"name": "x", "shape": [2, 4], "datatype": "FP32", "data": [[1, 2, 3], [4, 5, 6, 7, 8]]}]}"""),
                400, "input 'x': 'data' does not match shape [2, 4]");
        expectError(infer("doubler", """
                {"inputs": [{"name": "x", "shape": [2, 4], "datatype": "FP32", "data": [[1, 2, 3, 4], 5, 6, 7, 8]}]}"""),
                400, "input 'x': 'data' does not match shape [2, 4]");
        expectError(infer("doubler", """
                {"inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP32", "data": [[[1, 2, 3, 4]]]}]}"""),
                400, "input 'x': 'data' does not match shape [1, 4]");
        // flat and exactly nested both stay valid
        infer("doubler", """
                {"inputs": [{"name": "x", "shape": [2, 4], "datatype": "FP32", "data": [[1, 2, 3, 4], [5, 6, 7, 8]]}]}""")
                .expectStatus().isOk();
        infer("doubler", """
                {"inputs": [{"name": "x", "shape": [2, 4], "datatype": "FP32", "data": [1, 2, 3, 4, 5, 6, 7, 8]}]}""")
                .expectStatus().isOk();
    }

    @Test
    void duplicateJsonKeysAre400() {
        expectError(infer("doubler", """
                {"inputs": [{"name": "x", "shape": [1, 4], "shape": [2, 4], "datatype": "FP32", "data": [1, 2, 3, 4]}]}"""),
                400, "Duplicate Object property");
        expectError(infer("doubler", """
                {"id": "a", "id": "b",
                 "inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP32", "data": [1, 2, 3, 4]}]}"""),
                400, "Duplicate Object property");
        assertThat(fixture.model("doubler").invocations).hasValue(0);
    }

    // ---- large data ----

    @Test
    void aDataArrayLongerThanAnyInputOfTheModelTakesIsRefusedWhileParsing() {
        fixture.close();
        fixture = ServingFixture.builder().maxBody(1 << 20).build();
        // doubler takes at most 8 x 4 elements; parsing stops at 2 x 32 + 1024, long before the 100 001st
        String json = """
                {"inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP32", "data": [%s1]}]}"""
                .formatted("1,".repeat(100_000));
        expectError(infer("doubler", json), 400,
                "'data' holds more than 1088 elements, far more than any input of model 'doubler' takes (at most 32)");
        assertThat(fixture.model("doubler").invocations).hasValue(0);
    }

    @Test
    void decodingBeyondTheBudgetIs503WithRetryAfterAndLeavesTheBudgetAsItWas() {
        fixture.close();
        DecodingBudget budget = new DecodingBudget(8192);
        fixture = ServingFixture.builder().maxBody(4096).decodingBudget(budget).build();
        assertThat(budget.tryReserve(6000)).isTrue(); // another request is being decoded
        infer("doubler", """
                {"inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP32", "data": [1, 2, 3, 4]}], "pad": "%s"}"""
                .formatted("p".repeat(3000)))
                .expectStatus().isEqualTo(503)
                .expectHeader().valueEquals("Retry-After", "1")
                .expectBody().jsonPath("$.error").value(containsString("gpupool.server.max-decoding-bytes"));
        awaitReserved(budget, 6000, "the refused request's reservation given back");
        budget.release(6000);
        infer("doubler", """
                {"inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP32", "data": [1, 2, 3, 4]}]}""")
                .expectStatus().isOk();
        awaitReserved(budget, 0, "released after decoding");
    }

    /** Clients waiting for their answers, one thread each (exchange() blocks). */
    private final ExecutorService clients = Executors.newCachedThreadPool();

    /** A request whose body comes in parts, without a Content-Length (chunked), as {@code parts} emits them. */
    private CompletableFuture<WebTestClient.ResponseSpec> inferChunked(String model, Sinks.Many<DataBuffer> parts) {
        return CompletableFuture.supplyAsync(() -> fixture.client.post().uri("/v2/models/" + model + "/infer")
                .contentType(MediaType.APPLICATION_JSON)
                .body(BodyInserters.fromDataBuffers(parts.asFlux()))
                .exchange(), clients);
    }

    private static DataBuffer bytes(String text) {
        return DefaultDataBufferFactory.sharedInstance.wrap(text.getBytes(StandardCharsets.UTF_8));
    }

    @Test
    void aBodyWithoutALengthHoldsOnlyWhatHasArrivedSoTricklingClientsLeaveRoomForOthers() throws Exception {
        fixture.close();
        DecodingBudget budget = new DecodingBudget(8192);
        fixture = ServingFixture.builder().maxBody(4096).decodingBudget(budget).build();
        String head = "{\"inputs\": [{\"name\": \"x\", ";
        List<Sinks.Many<DataBuffer>> trickles = new ArrayList<>();
        List<CompletableFuture<WebTestClient.ResponseSpec>> answers = new ArrayList<>();
        for (int i = 0; i < 3; i++) {                           // three bodies as large as allowed would not fit
            trickles.add(Sinks.many().unicast().onBackpressureBuffer());
            answers.add(inferChunked("doubler", trickles.getLast()));
            trickles.getLast().tryEmitNext(bytes(head));
        }
        awaitReserved(budget, 3L * head.length(), "three trickling bodies hold what arrived of them");
        infer("doubler", """
                {"inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP32", "data": [1, 2, 3, 4]}]}""")
                .expectStatus().isOk();                         // another client is served meanwhile
        for (Sinks.Many<DataBuffer> trickle : trickles) {
            trickle.tryEmitNext(bytes("\"shape\": [1, 4], \"datatype\": \"FP32\", \"data\": [1, 2, 3, 4]}]}"));
            trickle.tryEmitComplete();
        }
        for (CompletableFuture<WebTestClient.ResponseSpec> answer : answers) {
            answer.get(10, TimeUnit.SECONDS).expectStatus().isOk()
                    .expectBody().jsonPath("$.outputs[0].data[0]").isEqualTo(2.0);
        }
        awaitReserved(budget, 0, "everything given back");
    }

    @Test
    void aBodyWithoutALengthThatOutgrowsTheBudgetIs503AfterItsEndAndGivesBackWhatItHeld() throws Exception {
        fixture.close();
        DecodingBudget budget = new DecodingBudget(8192);
        fixture = ServingFixture.builder().maxBody(4096).decodingBudget(budget).build();
        assertThat(budget.tryReserve(6000)).isTrue();          // another request is being decoded
        Sinks.Many<DataBuffer> parts = Sinks.many().unicast().onBackpressureBuffer();
        CompletableFuture<WebTestClient.ResponseSpec> answer = inferChunked("doubler", parts);
        parts.tryEmitNext(bytes("{\"inputs\": [{\"name\": \"x\", \"shape\": [1, 4], \"datatype\": \"FP32\", "));
        parts.tryEmitNext(bytes("\"data\": [1, 2, 3, 4]}], \"pad\": \"" + "p".repeat(3000) + "\"}"));
        parts.tryEmitComplete();
        answer.get(10, TimeUnit.SECONDS).expectStatus().isEqualTo(503)
                .expectHeader().valueEquals("Retry-After", "1")
                .expectBody().jsonPath("$.error").value(containsString("gpupool.server.max-decoding-bytes"));
        awaitReserved(budget, 6000, "the refused request's parts given back");
        assertThat(fixture.model("doubler").invocations).hasValue(0);
    }

    @Test
    void aCompressedBodyCountsAtTheSizeItInflatesTo() throws Exception {
        fixture.close();
        DecodingBudget budget = new DecodingBudget(8192);
        fixture = ServingFixture.builder().maxBody(4096).decodingBudget(budget).build();
        assertThat(budget.tryReserve(6000)).isTrue();
        String json = """
                {"inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP32", "data": [1, 2, 3, 4]}], "pad": "%s"}"""
                .formatted("p".repeat(3000));
        ByteArrayOutputStream packed = new ByteArrayOutputStream();
        try (GZIPOutputStream gzip = new GZIPOutputStream(packed)) {
            gzip.write(json.getBytes(StandardCharsets.UTF_8));
        }
        assertThat(packed.size()).as("small enough to fit as sent").isLessThan(2192);
        fixture.client.post().uri("/v2/models/doubler/infer").contentType(MediaType.APPLICATION_JSON)
                .header("Content-Encoding", "gzip").bodyValue(packed.toByteArray()).exchange()
                .expectStatus().isEqualTo(503)
                .expectBody().jsonPath("$.error").value(containsString("gpupool.server.max-decoding-bytes"));
        awaitReserved(budget, 6000, "what it took given back");
        budget.release(6000);
        fixture.client.post().uri("/v2/models/doubler/infer").contentType(MediaType.APPLICATION_JSON)
                .header("Content-Encoding", "gzip").bodyValue(packed.toByteArray()).exchange()
                .expectStatus().isOk();
        awaitReserved(budget, 0, "released after decoding");
    }

    /**
     * The budget is released when the request's body publisher terminates, which may be just after the
     * client has read the answer: poll (bounded) instead of reading it once.
     */
    private static void awaitReserved(DecodingBudget budget, long expected, String what) {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (budget.reserved() != expected && System.nanoTime() < deadline) {
            Thread.onSpinWait();
            Thread.yield();
        }
        assertThat(budget.reserved()).as(what).isEqualTo(expected);
    }

    // ---- what is echoed ----

    @Test
    void aHugeInputNameIsNotEchoedWhole() {
        String name = "n".repeat(3000);
        EntityExchangeResult<byte[]> result = infer("doubler", """
                {"inputs": [{"name": "%s", "shape": [1, 4], "datatype": "FP32", "data": [1, 2, 3, 4]}]}"""
                .formatted(name)).expectStatus().isBadRequest().expectBody().returnResult();
        String body = new String(result.getResponseBody(), StandardCharsets.UTF_8);
        assertThat(body).contains("unknown input 'nnnn").contains("(3000 characters)").hasSizeLessThan(600);
    }

    @Test
    void anIdLongerThanTheLimitIs400() {
        String id = "i".repeat(257);
        expectError(infer("doubler", """
                {"id": "%s", "inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP32", "data": [1, 2, 3, 4]}]}"""
                .formatted(id)), 400, "'id' has 257 characters; at most 256 are allowed");
        infer("doubler", """
                {"id": "%s", "inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP32", "data": [1, 2, 3, 4]}]}"""
                .formatted("i".repeat(256))).expectStatus().isOk();
    }

    @Test
    void theBodyLimitAppliesToUnknownModelsAndEndpoints() {
        String big = "{\"inputs\": [], \"pad\": \"" + "x".repeat(8000) + "\"}";
        expectError(infer("no-such-model", big), 413, "request body exceeds the limit of 4096 bytes");
        expectError(fixture.client.post().uri("/v2/nowhere").contentType(MediaType.APPLICATION_JSON).bodyValue(big)
                .exchange(), 413, "request body exceeds the limit of 4096 bytes");
        // below the limit the answers stay 404
        expectError(infer("no-such-model", "{}"), 404, "no-such-model");
    }
}
