package io.gpupool.serving;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.springframework.http.HttpHeaders;
import org.springframework.http.HttpMethod;
import org.springframework.http.MediaType;
import org.springframework.test.web.reactive.server.WebTestClient;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.zip.Deflater;
import java.util.zip.DeflaterOutputStream;
import java.util.zip.GZIPOutputStream;

import static org.assertj.core.api.Assertions.assertThat;
import static org.hamcrest.Matchers.containsString;

/**
 * What Triton's and KServe's clients call besides inference: HTTP method handling, compressed
 * request bodies, and the model configuration, statistics and shared-memory extensions.
 */
class ProtocolExtensionsTest {

    private static final String DOUBLE_ONE_ROW = """
            {"inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP32", "data": [1, 2, 3, 4]}]}""";

    private ServingFixture fixture;

    @AfterEach
    void close() {
        if (fixture != null) {
            fixture.close();
        }
    }

    private WebTestClient client() {
        if (fixture == null) {
            fixture = ServingFixture.builder().build();
        }
        return fixture.client;
    }

    private static void expectError(WebTestClient.ResponseSpec response, int status, String messagePart) {
        response.expectStatus().isEqualTo(status)
                .expectHeader().contentType(MediaType.APPLICATION_JSON)
                .expectBody().jsonPath("$.error").value(containsString(messagePart));
    }

    // ---- HTTP methods ----

    @Test
    void headAnswersEveryGetRouteWithItsStatusAndNoBody() {
        for (String uri : new String[]{"/v2/health/live", "/v2/health/ready", "/v2", "/v2/models/doubler",
                "/v2/models/doubler/ready", "/v2/models/doubler/config", "/v2/models/stats"}) {
            byte[] body = client().head().uri(uri).exchange().expectStatus().isOk()
                    .expectHeader().contentType(MediaType.APPLICATION_JSON)
                    .expectBody().returnResult().getResponseBody();
            assertThat(body).as("HEAD %s has no body", uri).isNullOrEmpty();
        }
        client().head().uri("/v2/models/nope").exchange().expectStatus().isNotFound();
    }

    @Test
    void wrongMethodIs405WithAllow() {
        WebTestClient.ResponseSpec deleteLive = client().delete().uri("/v2/health/live").exchange();
        deleteLive.expectHeader().valueEquals(HttpHeaders.ALLOW, "GET, HEAD, OPTIONS");
        expectError(client().delete().uri("/v2/health/live").exchange(), 405, "method DELETE is not allowed");
        client().get().uri("/v2/models/doubler/infer").exchange().expectStatus().isEqualTo(405)
                .expectHeader().valueEquals(HttpHeaders.ALLOW, "POST, OPTIONS");
        client().put().uri("/v2/models/doubler/infer").bodyValue(DOUBLE_ONE_ROW).exchange()
                .expectStatus().isEqualTo(405);
        // a path that is not ours stays 404
        expectError(client().delete().uri("/v2/nothing").exchange(), 404, "no endpoint DELETE /v2/nothing");
    }

    @Test
    void optionsListsTheMethodsOfAPath() {
        client().options().uri("/v2/models/doubler").exchange().expectStatus().isNoContent()
                .expectHeader().valueEquals(HttpHeaders.ALLOW, "GET, HEAD, OPTIONS");
        client().method(HttpMethod.OPTIONS).uri("/v2/repository/index").exchange().expectStatus().isNoContent()
                .expectHeader().valueEquals(HttpHeaders.ALLOW, "POST, OPTIONS");
    }

    // ---- compressed request bodies ----

    @Test
    void gzipAndDeflateBodiesAreInflated() throws IOException {
        byte[] json = DOUBLE_ONE_ROW.getBytes(StandardCharsets.UTF_8);
        for (String encoding : new String[]{"gzip", "deflate", "raw-deflate"}) {
            byte[] body = switch (encoding) {
                case "gzip" -> gzip(json);
                case "deflate" -> deflate(json, false);
                default -> deflate(json, true);
            };
            client().post().uri("/v2/models/doubler/infer").contentType(MediaType.APPLICATION_JSON)
                    .header(HttpHeaders.CONTENT_ENCODING, encoding.equals("raw-deflate") ? "deflate" : encoding)
                    .bodyValue(body).exchange().expectStatus().isOk().expectBody()
                    .jsonPath("$.outputs[0].data[3]").isEqualTo(8.0);
        }
    }

    @Test
    void aZipBombIs413AfterAtMostTheLimitOfOutput() throws IOException {
        fixture = ServingFixture.builder().maxBody(64 * 1024).build();
        byte[] bomb = gzip(new byte[64 * 1024 * 1024]);
        assertThat(bomb.length).as("64 MiB of zeros compress below the 64 KiB limit").isLessThan(64 * 1024);
        expectError(fixture.client.post().uri("/v2/models/doubler/infer").contentType(MediaType.APPLICATION_JSON)
                .header(HttpHeaders.CONTENT_ENCODING, "gzip").bodyValue(bomb).exchange(), 413,
                "decompressed request body exceeds the limit of 65536 bytes");
        assertThat(fixture.model("doubler").invocations).hasValue(0);
    }

    @Test
    void corruptOrUnknownEncodingIsA4xxNamingIt() {
        expectError(client().post().uri("/v2/models/doubler/infer").contentType(MediaType.APPLICATION_JSON)
                .header(HttpHeaders.CONTENT_ENCODING, "gzip").bodyValue(DOUBLE_ONE_ROW.getBytes(StandardCharsets.UTF_8))
                .exchange(), 400, "not valid gzip data");
        expectError(client().post().uri("/v2/models/doubler/infer").contentType(MediaType.APPLICATION_JSON)
                .header(HttpHeaders.CONTENT_ENCODING, "br").bodyValue(DOUBLE_ONE_ROW).exchange(), 415,
                "Content-Encoding 'br' is not supported");
    }

    @Test
    void serverMetadataListsTheExtensionsOffered() {
        client().get().uri("/v2").exchange().expectStatus().isOk().expectBody()
                .jsonPath("$.extensions").isEqualTo(java.util.List.of("binary_tensor_data", "classification",
                        "model_configuration", "statistics"));
        fixture.close();
        fixture = ServingFixture.builder().modelControl().build();
        fixture.client.get().uri("/v2").exchange().expectBody()
                .jsonPath("$.extensions[4]").isEqualTo("model_repository");
    }

    // ---- model configuration ----

    @Test
    void modelConfigurationInTritonsTerms() {
        for (String uri : new String[]{"/v2/models/doubler/config", "/v2/models/doubler/versions/1/config"}) {
            client().get().uri(uri).exchange().expectStatus().isOk().expectBody()
                    .jsonPath("$.name").isEqualTo("doubler")
                    .jsonPath("$.platform").isEqualTo("test")
                    .jsonPath("$.backend").isEqualTo("gpupool")
                    .jsonPath("$.max_batch_size").isEqualTo(8)
                    .jsonPath("$.input[0].name").isEqualTo("x")
                    .jsonPath("$.input[0].data_type").isEqualTo("TYPE_FP32")
                    .jsonPath("$.input[0].dims.length()").isEqualTo(1)
                    .jsonPath("$.input[0].dims[0]").isEqualTo(4)
                    .jsonPath("$.output[1].name").isEqualTo("argmax")
                    .jsonPath("$.output[1].data_type").isEqualTo("TYPE_INT64")
                    .jsonPath("$.output[1].dims.length()").isEqualTo(0)
                    .jsonPath("$.instance_group[0].count").isEqualTo(2)
                    .jsonPath("$.dynamic_batching").doesNotExist();
        }
        client().get().uri("/v2/models/tokens/config").exchange().expectStatus().isOk().expectBody()
                .jsonPath("$.parameters.max_sequence_length.string_value").isEqualTo("16");
        expectError(client().get().uri("/v2/models/nope/config").exchange(), 404, "unknown model 'nope'");
        expectError(client().get().uri("/v2/models/doubler/versions/3/config").exchange(), 404, "no version '3'");
    }

    // ---- statistics ----

    @Test
    void statisticsCountRequestsRowsAndExecutions() {
        client().get().uri("/v2/models/doubler/stats").exchange().expectStatus().isOk().expectBody()
                .jsonPath("$.model_stats[0].name").isEqualTo("doubler")
                .jsonPath("$.model_stats[0].inference_count").isEqualTo(0)
                .jsonPath("$.model_stats[0].last_inference").isEqualTo(0);
        long before = System.currentTimeMillis();
        infer("""
                {"inputs": [{"name": "x", "shape": [3, 4], "datatype": "FP32", "data": [1,2,3,4,1,2,3,4,1,2,3,4]}]}""")
                .expectStatus().isOk();
        infer(DOUBLE_ONE_ROW).expectStatus().isOk();
        infer(DOUBLE_ONE_ROW).expectStatus().isOk();
        client().get().uri("/v2/models/doubler/versions/1/stats").exchange().expectStatus().isOk().expectBody()
                .jsonPath("$.model_stats.length()").isEqualTo(1)
                .jsonPath("$.model_stats[0].version").isEqualTo("1")
                .jsonPath("$.model_stats[0].inference_count").isEqualTo(5)
                .jsonPath("$.model_stats[0].execution_count").isEqualTo(3)
                .jsonPath("$.model_stats[0].last_inference").value(ms -> assertThat(((Number) ms).longValue())
                        .isGreaterThanOrEqualTo(before))
                .jsonPath("$.model_stats[0].inference_stats.success.count").isEqualTo(3)
                .jsonPath("$.model_stats[0].inference_stats.success.ns").value(ns -> assertThat(((Number) ns).longValue())
                        .isPositive())
                .jsonPath("$.model_stats[0].inference_stats.queue.count").isEqualTo(3)
                .jsonPath("$.model_stats[0].inference_stats.compute_infer.count").isEqualTo(3)
                .jsonPath("$.model_stats[0].inference_stats.fail.count").isEqualTo(0)
                .jsonPath("$.model_stats[0].batch_stats.length()").isEqualTo(2)
                .jsonPath("$.model_stats[0].batch_stats[0].batch_size").isEqualTo(1)
                .jsonPath("$.model_stats[0].batch_stats[0].compute_infer.count").isEqualTo(2)
                .jsonPath("$.model_stats[0].batch_stats[1].batch_size").isEqualTo(3)
                .jsonPath("$.model_stats[0].batch_stats[1].compute_infer.count").isEqualTo(1)
                .jsonPath("$.model_stats[0].gpupool_memory.requests_bytes").isEqualTo(0);
        client().get().uri("/v2/models/stats").exchange().expectStatus().isOk().expectBody()
                .jsonPath("$.model_stats.length()").isEqualTo(3)
                .jsonPath("$.model_stats[?(@.name=='echo')].inference_count").isEqualTo(0);
        expectError(client().get().uri("/v2/models/nope/stats").exchange(), 404, "unknown model 'nope'");
    }

    @Test
    void aRequestTheModelRefusesCountsAsFailed() {
        fixture = ServingFixture.builder().memoryLimit(100).noWarmUp().build();
        fixture.registry.models().forEach(ServedModel::markReady);
        infer("""
                {"inputs": [{"name": "x", "shape": [8, 4], "datatype": "FP32", "data": [%s]}]}"""
                .formatted("1,".repeat(31) + "1")).expectStatus().isEqualTo(507);
        client().get().uri("/v2/models/doubler/stats").exchange().expectStatus().isOk().expectBody()
                .jsonPath("$.model_stats[0].inference_stats.fail.count").isEqualTo(1)
                .jsonPath("$.model_stats[0].inference_stats.success.count").isEqualTo(0)
                .jsonPath("$.model_stats[0].inference_count").isEqualTo(0);
    }

    // ---- shared memory ----

    @Test
    void sharedMemoryIsReportedAsUnsupported() {
        for (String kind : new String[]{"systemsharedmemory", "cudasharedmemory"}) {
            client().get().uri("/v2/" + kind + "/status").exchange().expectStatus().isOk()
                    .expectBody().json("[]", true);
            expectError(client().get().uri("/v2/" + kind + "/region/r0/status").exchange(), 404,
                    "shared memory region 'r0' is registered; ");
            client().post().uri("/v2/" + kind + "/unregister").exchange().expectStatus().isOk();
            client().post().uri("/v2/" + kind + "/region/r0/unregister").exchange().expectStatus().isOk();
        }
        expectError(client().post().uri("/v2/systemsharedmemory/region/r0/register").contentType(MediaType.APPLICATION_JSON)
                .bodyValue("{\"key\": \"/r0\", \"offset\": 0, \"byte_size\": 64}").exchange(), 400,
                "system shared memory is not supported");
        expectError(client().post().uri("/v2/cudasharedmemory/region/r0/register").contentType(MediaType.APPLICATION_JSON)
                .bodyValue("{\"raw_handle\": {\"b64\": \"AA==\"}, \"device_id\": 0, \"byte_size\": 64}").exchange(), 400,
                "CUDA shared memory is not supported");
        byte[] huge = new byte[(1 << 20) + 1];                     // one byte above the fixture's max-body-size
        for (String path : new String[] {"/v2/systemsharedmemory/unregister", "/v2/cudasharedmemory/region/r0/register"}) {
            expectError(client().post().uri(path).contentType(MediaType.APPLICATION_OCTET_STREAM).bodyValue(huge)
                    .exchange(), 413, "exceeds the limit of 1048576 bytes");
        }
    }

    @Test
    void anInputNamingASharedMemoryRegionIsRefusedSayingSo() {
        expectError(infer("""
                {"inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP32",
                  "parameters": {"shared_memory_region": "r0", "shared_memory_byte_size": 16}}]}"""), 400,
                "shared memory is not supported");
    }

    @Test
    void anOutputNamingASharedMemoryRegionIsRefusedSayingSo() {
        expectError(infer("""
                {"inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP32", "data": [1, 2, 3, 4]}],
                 "outputs": [{"name": "y", "parameters": {"shared_memory_region": "out0", "shared_memory_byte_size": 16}}]}"""),
                400, "output 'y' names a shared-memory region");
    }

    // ---- BYTES ----

    @Test
    void bytesTravelAsJsonStrings() {
        client().post().uri("/v2/models/echo/infer").contentType(MediaType.APPLICATION_JSON).bodyValue("""
                {"inputs": [{"name": "bytes", "shape": [3], "datatype": "BYTES", "data": ["hello", "", "naïve ☃"]}],
                 "outputs": [{"name": "bytes_out"}]}""")
                .exchange().expectStatus().isOk().expectBody()
                .jsonPath("$.outputs[?(@.name=='bytes_out')].datatype").isEqualTo("BYTES")
                .jsonPath("$.outputs[0].data").isEqualTo(java.util.List.of("hello", "", "naïve ☃"));
        expectError(client().post().uri("/v2/models/echo/infer").contentType(MediaType.APPLICATION_JSON).bodyValue("""
                {"inputs": [{"name": "bytes", "shape": [2], "datatype": "BYTES", "data": ["one", 2]}],
                 "outputs": [{"name": "bytes_out"}]}""").exchange(),
                400, "element 1 (2) is not a valid BYTES value");
        expectError(client().post().uri("/v2/models/echo/infer").contentType(MediaType.APPLICATION_JSON).bodyValue("""
                {"inputs": [{"name": "bytes", "shape": [2], "datatype": "BYTES", "data": ["one"]}]}""").exchange(),
                400, "shape needs 2 elements but 'data' holds 1");
    }

    @Test
    void bytesTravelAsLengthPrefixedBinaryBothWays() {
        byte[] elements = io.gpupool.model.BytesElements.encode(java.util.List.of(
                "ab".getBytes(StandardCharsets.UTF_8), new byte[]{0, (byte) 0xFF, 7}));
        String header = """
                {"inputs": [{"name": "bytes", "shape": [2], "datatype": "BYTES",
                  "parameters": {"binary_data_size": %d}}],
                 "outputs": [{"name": "bytes_out", "parameters": {"binary_data": true}}]}""".formatted(elements.length);
        byte[] json = header.getBytes(StandardCharsets.UTF_8);
        byte[] body = java.util.Arrays.copyOf(json, json.length + elements.length);
        System.arraycopy(elements, 0, body, json.length, elements.length);
        byte[] answer = client().post().uri("/v2/models/echo/infer").contentType(MediaType.APPLICATION_OCTET_STREAM)
                .header(InferenceHandler.HEADER_LENGTH, Integer.toString(json.length)).bodyValue(body).exchange()
                .expectStatus().isOk().expectBody().returnResult().getResponseBody();
        assertThat(answer).endsWith(elements);
        // a length prefix that runs past the section
        byte[] cut = java.util.Arrays.copyOf(body, body.length);
        cut[json.length] = 50;
        expectError(client().post().uri("/v2/models/echo/infer").contentType(MediaType.APPLICATION_OCTET_STREAM)
                .header(InferenceHandler.HEADER_LENGTH, Integer.toString(json.length)).bodyValue(cut).exchange(), 400,
                "needs 2 BYTES elements (each a 4-byte little-endian length, then its bytes), the binary section holds "
                        + "a cut-short element");
    }

    @Test
    void aBytesSectionDeclaredNearTheLargestLongIsRefusedNamingItsSize() {
        for (long declared : new long[] {Long.MAX_VALUE, Long.MAX_VALUE - 10}) {
            byte[] json = """
                    {"inputs": [{"name": "bytes", "shape": [1], "datatype": "BYTES",
                      "parameters": {"binary_data_size": %d}}]}""".formatted(declared).getBytes(StandardCharsets.UTF_8);
            byte[] body = java.util.Arrays.copyOf(json, json.length + 9);
            body[json.length] = 5;
            expectError(client().post().uri("/v2/models/echo/infer").contentType(MediaType.APPLICATION_OCTET_STREAM)
                    .header(InferenceHandler.HEADER_LENGTH, Integer.toString(json.length)).bodyValue(body).exchange(),
                    400, "binary section ends after 9 of the " + declared + " bytes it declares");
        }
    }

    @Test
    void configurationNamesBytesAsTritonsTypeString() {
        client().get().uri("/v2/models/echo/config").exchange().expectStatus().isOk().expectBody()
                .jsonPath("$.input[?(@.name=='bytes')].data_type").isEqualTo("TYPE_STRING");
    }

    // ---- raw binary request ----

    @Test
    void aRawBinaryBodyIsTheOnlyInputsData() {
        java.nio.ByteBuffer rows = java.nio.ByteBuffer.allocate(32).order(java.nio.ByteOrder.LITTLE_ENDIAN);
        for (float v : new float[]{1, 2, 3, 4, 9, 8, 7, 6}) {
            rows.putFloat(v);
        }
        client().post().uri("/v2/models/doubler/infer").contentType(MediaType.APPLICATION_OCTET_STREAM)
                .header(InferenceHandler.HEADER_LENGTH, "0").bodyValue(rows.array()).exchange()
                .expectStatus().isOk().expectBody()
                .jsonPath("$.outputs[0].shape[0]").isEqualTo(2)
                .jsonPath("$.outputs[0].data[4]").isEqualTo(18.0)
                .jsonPath("$.outputs[1].data[1]").isEqualTo(0);
        expectError(client().post().uri("/v2/models/doubler/infer").contentType(MediaType.APPLICATION_OCTET_STREAM)
                .header(InferenceHandler.HEADER_LENGTH, "0").bodyValue(new byte[20]).exchange(), 400,
                "20 bytes are not a whole number of rows of input x:FP32[-1, 4] (16 bytes each)");
        expectError(client().post().uri("/v2/models/echo/infer").contentType(MediaType.APPLICATION_OCTET_STREAM)
                .header(InferenceHandler.HEADER_LENGTH, "0").bodyValue(new byte[8]).exchange(), 400,
                "needs a model with exactly one input");
        java.nio.ByteBuffer notFinite = java.nio.ByteBuffer.allocate(16).order(java.nio.ByteOrder.LITTLE_ENDIAN)
                .putFloat(Float.NaN).putFloat(Float.POSITIVE_INFINITY).putFloat(1).putFloat(1);
        expectError(client().post().uri("/v2/models/doubler/infer").contentType(MediaType.APPLICATION_OCTET_STREAM)
                .header(InferenceHandler.HEADER_LENGTH, "0").bodyValue(notFinite.array()).exchange(), 400,
                "element 0 (NaN) is not a valid FP32 value");
        expectError(client().post().uri("/v2/models/tokens/infer").contentType(MediaType.APPLICATION_OCTET_STREAM)
                .header(InferenceHandler.HEADER_LENGTH, "0").bodyValue(new byte[8]).exchange(), 400,
                "needs every dimension of input 'ids' but the batch to be fixed");
    }

    private WebTestClient.ResponseSpec infer(String json) {
        return client().post().uri("/v2/models/doubler/infer").contentType(MediaType.APPLICATION_JSON)
                .bodyValue(json).exchange();
    }

    static byte[] gzip(byte[] data) throws IOException {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        try (GZIPOutputStream gzip = new GZIPOutputStream(out)) {
            gzip.write(data);
        }
        return out.toByteArray();
    }

    static byte[] deflate(byte[] data, boolean raw) throws IOException {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        try (DeflaterOutputStream deflate = new DeflaterOutputStream(out, new Deflater(Deflater.DEFAULT_COMPRESSION, raw))) {
            deflate.write(data);
        }
        return out.toByteArray();
    }
}
