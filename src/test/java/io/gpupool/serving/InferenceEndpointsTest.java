package io.gpupool.serving;

import io.gpupool.memory.OutOfDeviceMemoryException;
import io.gpupool.serving.fake.TestModel;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.springframework.http.HttpHeaders;
import org.springframework.http.MediaType;
import org.springframework.test.web.reactive.server.EntityExchangeResult;
import org.springframework.test.web.reactive.server.WebTestClient;
import reactor.core.Disposable;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.hamcrest.Matchers.containsString;

/** Every endpoint of the protocol and every error status, over fake devices and test models. */
class InferenceEndpointsTest {

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

    private WebTestClient.ResponseSpec infer(String model, String json) {
        return client().post().uri("/v2/models/" + model + "/infer").contentType(MediaType.APPLICATION_JSON)
                .bodyValue(json).exchange();
    }

    private void expectError(WebTestClient.ResponseSpec response, int status, String messagePart) {
        response.expectStatus().isEqualTo(status)
                .expectHeader().contentType(MediaType.APPLICATION_JSON)
                .expectBody().jsonPath("$.error").value(containsString(messagePart));
    }

    // ---- health and metadata ----

    @Test
    void everyRouteIsShownToAVisitorSuchAsTheActuatorsMappingsInMatchOrder() {
        client();
        List<String> shown = new ArrayList<>();
        fixture.routes.accept(new org.springframework.web.reactive.function.server.RouterFunctions.Visitor() {
            @Override
            public void route(org.springframework.web.reactive.function.server.RequestPredicate predicate,
                              org.springframework.web.reactive.function.server.HandlerFunction<?> handler) {
                shown.add(predicate.toString());
            }

            @Override
            public void startNested(org.springframework.web.reactive.function.server.RequestPredicate predicate) {
            }

            @Override
            public void endNested(org.springframework.web.reactive.function.server.RequestPredicate predicate) {
            }

            @Override
            public void resources(java.util.function.Function<org.springframework.web.reactive.function.server
                    .ServerRequest, reactor.core.publisher.Mono<org.springframework.core.io.Resource>> lookup) {
            }

            @Override
            public void attributes(java.util.Map<String, Object> attributes) {
            }

            @Override
            public void unknown(org.springframework.web.reactive.function.server.RouterFunction<?> routerFunction) {
                shown.add("unknown");
            }
        });
        assertThat(shown).doesNotContain("unknown").hasSizeGreaterThan(40);
        assertThat(shown.getFirst()).contains("GET").contains("/v2/health/live");
        assertThat(shown).anySatisfy(p -> assertThat(p).contains("POST").contains("/v2/models/{model}/infer"));
        assertThat(shown.getLast()).as("the catch-all comes last").contains("/**");
    }

    @Test
    void liveAndReadyAnswer200WithTheFlagsKServesClientReads() {
        client().get().uri("/v2/health/live").exchange().expectStatus().isOk()
                .expectHeader().contentType(MediaType.APPLICATION_JSON)
                .expectBody().json("{\"live\": true}", true);
        client().get().uri("/v2/health/ready").exchange().expectStatus().isOk()
                .expectBody().json("{\"ready\": true}", true);
        client().get().uri("/v2/models/doubler/ready").exchange().expectStatus().isOk()
                .expectBody().json("{\"name\": \"doubler\", \"ready\": true}", true);
        assertThat(fixture.registry.models()).allMatch(ServedModel::isReady);
    }

    @Test
    void readinessIs503UntilWarmUpHasRun() {
        fixture = ServingFixture.builder().noWarmUp().build();
        expectError(fixture.client.get().uri("/v2/health/ready").exchange(), 503, "warm-up");
        fixture.client.get().uri("/v2/health/ready").exchange().expectBody().jsonPath("$.ready").isEqualTo(false);
        expectError(fixture.client.get().uri("/v2/models/doubler/ready").exchange(), 503, "not ready");
        fixture.client.get().uri("/v2/models/doubler/ready").exchange().expectBody()
                .jsonPath("$.ready").isEqualTo(false).jsonPath("$.name").isEqualTo("doubler");
        expectError(infer("doubler", "{\"inputs\":[]}"), 503, "not ready");
        new WarmUp(fixture.registry, fixture.runtimes, 64, 512).run();
        fixture.client.get().uri("/v2/health/ready").exchange().expectStatus().isOk();
        fixture.client.get().uri("/v2/models/doubler/ready").exchange().expectStatus().isOk();
        assertThat(fixture.model("doubler").invocations).as("one max-size dry run").hasValue(1);
        assertThat(fixture.allocatedBytes()).isZero();
    }

    @Test
    void serverMetadataAdvertisesBinaryTensorData() {
        for (String uri : new String[]{"/v2", "/v2/"}) {
            client().get().uri(uri).exchange().expectStatus().isOk().expectBody()
                    .jsonPath("$.name").isEqualTo("gpupool")
                    .jsonPath("$.version").isEqualTo("test")
                    .jsonPath("$.extensions[0]").isEqualTo("binary_tensor_data");
        }
    }

    @Test
    void modelMetadataUsesMinusOneForVariableDimensions() {
        for (String uri : new String[]{"/v2/models/doubler", "/v2/models/doubler/versions/1"}) {
            client().get().uri(uri).exchange().expectStatus().isOk().expectBody()
                    .jsonPath("$.name").isEqualTo("doubler")
                    .jsonPath("$.versions[0]").isEqualTo("1")
                    .jsonPath("$.platform").isEqualTo("test")
                    .jsonPath("$.inputs[0].name").isEqualTo("x")
                    .jsonPath("$.inputs[0].datatype").isEqualTo("FP32")
                    .jsonPath("$.inputs[0].shape[0]").isEqualTo(-1)
                    .jsonPath("$.inputs[0].shape[1]").isEqualTo(4)
                    .jsonPath("$.outputs[1].name").isEqualTo("argmax")
                    .jsonPath("$.outputs[1].datatype").isEqualTo("INT64");
        }
    }

    @Test
    void modelReadyWithAndWithoutVersion() {
        client().get().uri("/v2/models/echo/ready").exchange().expectStatus().isOk();
        client().get().uri("/v2/models/echo/versions/1/ready").exchange().expectStatus().isOk();
        expectError(client().get().uri("/v2/models/echo/versions/7/ready").exchange(), 404, "no version '7'");
    }

    @Test
    void unknownModelOrVersionIs404() {
        expectError(client().get().uri("/v2/models/nope").exchange(), 404, "unknown model 'nope'");
        expectError(client().get().uri("/v2/models/nope/ready").exchange(), 404, "unknown model 'nope'");
        expectError(client().get().uri("/v2/models/doubler/versions/2").exchange(), 404, "no version '2'");
        expectError(infer("nope", "{}"), 404, "unknown model 'nope'");
        expectError(client().post().uri("/v2/models/doubler/versions/2/infer").bodyValue("{}").exchange(), 404,
                "no version '2'");
    }

    @Test
    void modelNamesWithPathTricksAre400() {
        expectError(client().get().uri("/v2/models/{m}", "..").exchange(), 400, "invalid model name");
        expectError(client().get().uri("/v2/models/{m}", "a b").exchange(), 400, "invalid model name");
        expectError(client().post().uri("/v2/models/{m}/infer", "..%2F..%2Fetc").bodyValue("{}").exchange(), 400,
                "invalid model name");
        expectError(client().get().uri("/v2/models/{m}", "..").exchange(), 400, "must not be empty, '.' or '..'");
        expectError(client().get().uri("/v2/models/{m}", "a b").exchange(), 400,
                "only letters, digits, '_', '.' and '-' are allowed");
        expectError(client().get().uri("/v2/models/{m}", "a".repeat(129)).exchange(), 400,
                "it has 129 characters; at most 128 are allowed");
        expectError(client().get().uri("/v2/models/{m}", "a".repeat(128)).exchange(), 404, "unknown model");
        expectError(client().get().uri("/v2/models/{m}/versions/{v}", "doubler", "v".repeat(200)).exchange(), 400,
                "invalid model version");
    }

    @Test
    void unknownEndpointUnderV2Is404Json() {
        expectError(client().get().uri("/v2/nothing/here").exchange(), 404, "no endpoint GET /v2/nothing/here");
        for (String outside : new String[] {"/", "/V2/models", "/index.html"}) {
            expectError(client().get().uri(outside).exchange(), 404,
                    "no endpoint GET " + outside + " (the inference API is under /v2");
        }
    }

    @Test
    void repositoryIndexListsServedAndFailedModels() {
        fixture = ServingFixture.builder()
                .failures(java.util.List.of(new ModelFailure("broken", "1", "config.json: missing hidden_size"))).build();
        fixture.client.post().uri("/v2/repository/index").exchange().expectStatus().isOk().expectBody()
                .jsonPath("$.length()").isEqualTo(4)
                .jsonPath("$[?(@.name=='doubler')].state").isEqualTo("READY")
                .jsonPath("$[?(@.name=='doubler')].version").isEqualTo("1")
                .jsonPath("$[?(@.name=='broken')].state").isEqualTo("UNAVAILABLE")
                .jsonPath("$[?(@.name=='broken')].reason").isEqualTo("config.json: missing hidden_size");
        fixture.client.post().uri("/v2/repository/index").contentType(MediaType.APPLICATION_JSON)
                .bodyValue("{\"ready\": true}").exchange().expectStatus().isOk().expectBody()
                .jsonPath("$.length()").isEqualTo(3);
        expectError(fixture.client.post().uri("/v2/repository/index").contentType(MediaType.APPLICATION_JSON)
                .bodyValue("{\"ready\": 3}").exchange(), 400, "'ready' must be true or false");
        for (String body : new String[] {"[]", "5", "\"x\""}) {
            expectError(fixture.client.post().uri("/v2/repository/index").contentType(MediaType.APPLICATION_JSON)
                    .bodyValue(body).exchange(), 400, "a repository index request body must be one JSON object");
        }
        expectError(fixture.client.post().uri("/v2/repository/index").contentType(MediaType.APPLICATION_JSON)
                .bodyValue("{\"ready\": false, \"ready\": true}").exchange(), 400,
                "malformed repository index request JSON: Duplicate Object property \"ready\"");
    }

    // ---- inference ----

    @Test
    void nestedJsonTensorIsRowMajorAndIdIsEchoed() {
        infer("doubler", """
                {"id": "req-42", "inputs": [{"name": "x", "shape": [2, 4], "datatype": "FP32",
                  "data": [[1, 2, 3, 4], [8, 7, 6, 5]]}]}""")
                .expectStatus().isOk().expectHeader().contentType(MediaType.APPLICATION_JSON).expectBody()
                .jsonPath("$.model_name").isEqualTo("doubler")
                .jsonPath("$.model_version").isEqualTo("1")
                .jsonPath("$.id").isEqualTo("req-42")
                .jsonPath("$.outputs[0].name").isEqualTo("y")
                .jsonPath("$.outputs[0].datatype").isEqualTo("FP32")
                .jsonPath("$.outputs[0].shape[0]").isEqualTo(2)
                .jsonPath("$.outputs[0].shape[1]").isEqualTo(4)
                .jsonPath("$.outputs[0].data[1]").isEqualTo(4.0)
                .jsonPath("$.outputs[0].data[4]").isEqualTo(16.0)
                .jsonPath("$.outputs[1].data[0]").isEqualTo(3)
                .jsonPath("$.outputs[1].data[1]").isEqualTo(0);
        assertThat(fixture.allocatedBytes()).isZero();
    }

    @Test
    void flatJsonAndVersionedUriGiveTheSameAnswer() {
        client().post().uri("/v2/models/doubler/versions/1/infer").contentType(MediaType.APPLICATION_JSON)
                .bodyValue("""
                        {"inputs": [{"name": "x", "shape": [2, 4], "datatype": "FP32",
                          "data": [1, 2, 3, 4, 8, 7, 6, 5]}]}""")
                .exchange().expectStatus().isOk().expectBody()
                .jsonPath("$.id").doesNotExist()
                .jsonPath("$.outputs[0].data[4]").isEqualTo(16.0);
    }

    @Test
    void outputsSelectsWhatIsReturned() {
        infer("doubler", """
                {"inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP32", "data": [1, 9, 3, 4]}],
                 "outputs": [{"name": "argmax"}]}""")
                .expectStatus().isOk().expectBody()
                .jsonPath("$.outputs.length()").isEqualTo(1)
                .jsonPath("$.outputs[0].name").isEqualTo("argmax")
                .jsonPath("$.outputs[0].data[0]").isEqualTo(1);
    }

    @Test
    void everyDatatypeRoundTripsThroughJson() {
        infer("echo", """
                {"inputs": [
                  {"name": "fp32", "shape": [2], "datatype": "FP32", "data": [1.5, -2.25]},
                  {"name": "fp16", "shape": [2], "datatype": "FP16", "data": [0.5, 65504]},
                  {"name": "bf16", "shape": [2], "datatype": "BF16", "data": [1.00390625, 1.01171875]},
                  {"name": "int64", "shape": [2], "datatype": "INT64", "data": [9007199254740993, -1]},
                  {"name": "int32", "shape": [2], "datatype": "INT32", "data": [2147483647, -2147483648]},
                  {"name": "bool", "shape": [2], "datatype": "BOOL", "data": [true, false]},
                  {"name": "bytes", "shape": [2], "datatype": "BYTES", "data": ["a", "ü"]}]}""")
                .expectStatus().isOk().expectBody()
                .jsonPath("$.outputs[0].data[1]").isEqualTo(-2.25)
                .jsonPath("$.outputs[1].datatype").isEqualTo("FP16")
                .jsonPath("$.outputs[1].data[0]").isEqualTo(0.5)
                .jsonPath("$.outputs[1].data[1]").isEqualTo(65504.0)
                .jsonPath("$.outputs[2].datatype").isEqualTo("BF16")
                .jsonPath("$.outputs[2].data[0]").isEqualTo(1.0) // ties round to even
                .jsonPath("$.outputs[2].data[1]").isEqualTo(1.015625)
                .jsonPath("$.outputs[3].data[0]").isEqualTo(9007199254740993L)
                .jsonPath("$.outputs[4].data[1]").isEqualTo(Integer.MIN_VALUE)
                .jsonPath("$.outputs[5].data[0]").isEqualTo(true)
                .jsonPath("$.outputs[5].data[1]").isEqualTo(false)
                .jsonPath("$.outputs[6].data[1]").isEqualTo("ü");
    }

    @Test
    void binaryTensorDataInBothDirections() {
        String header = """
                {"inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP32", "parameters": {"binary_data_size": 16}}],
                 "outputs": [{"name": "y", "parameters": {"binary_data": true}}, {"name": "argmax"}]}""";
        byte[] json = header.getBytes(StandardCharsets.UTF_8);
        ByteBuffer body = ByteBuffer.allocate(json.length + 16).order(ByteOrder.LITTLE_ENDIAN);
        body.put(json).putFloat(1).putFloat(-2).putFloat(3.5f).putFloat(0);
        EntityExchangeResult<byte[]> result = client().post().uri("/v2/models/doubler/infer")
                .contentType(MediaType.APPLICATION_OCTET_STREAM)
                .header(InferenceHandler.HEADER_LENGTH, Integer.toString(json.length))
                .bodyValue(body.array()).exchange()
                .expectStatus().isOk()
                .expectHeader().contentType(MediaType.APPLICATION_OCTET_STREAM)
                .expectBody(byte[].class).returnResult();
        int jsonLength = Integer.parseInt(result.getResponseHeaders().getFirst(InferenceHandler.HEADER_LENGTH));
        byte[] response = result.getResponseBody();
        String responseJson = new String(response, 0, jsonLength, StandardCharsets.UTF_8);
        assertThat(responseJson).contains("\"binary_data_size\":16").contains("\"name\":\"argmax\"")
                .contains("\"data\":[2]");
        ByteBuffer binary = ByteBuffer.wrap(response, jsonLength, response.length - jsonLength).order(ByteOrder.LITTLE_ENDIAN);
        assertThat(response.length - jsonLength).isEqualTo(16);
        assertThat(new float[]{binary.getFloat(), binary.getFloat(), binary.getFloat(), binary.getFloat()})
                .containsExactly(2f, -4f, 7f, 0f);
    }

    @Test
    void binaryDataOutputParameterMakesEveryOutputBinary() {
        EntityExchangeResult<byte[]> result = infer("doubler", """
                {"parameters": {"binary_data_output": true},
                 "inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP32", "data": [1, 2, 3, 4]}]}""")
                .expectStatus().isOk().expectHeader().contentType(MediaType.APPLICATION_OCTET_STREAM)
                .expectBody(byte[].class).returnResult();
        int jsonLength = Integer.parseInt(result.getResponseHeaders().getFirst(InferenceHandler.HEADER_LENGTH));
        assertThat(result.getResponseBody().length - jsonLength).isEqualTo(16 + 8);
    }

    // ---- classification extension ----

    @Test
    void classificationAnswersEachRowsLargestValuesWithTheirIndexAsText() {
        infer("doubler", """
                {"inputs": [{"name": "x", "shape": [2, 4], "datatype": "FP32", "data": [1, 4, 2, 4, 0.5, -1, 3, 0]}],
                 "outputs": [{"name": "y", "parameters": {"classification": 3}}, {"name": "argmax"}]}""")
                .expectStatus().isOk().expectBody()
                .jsonPath("$.outputs[0].name").isEqualTo("y")
                .jsonPath("$.outputs[0].datatype").isEqualTo("BYTES")
                .jsonPath("$.outputs[0].shape").isEqualTo(List.of(2, 3))
                .jsonPath("$.outputs[0].data").isEqualTo(List.of("8.0:1", "8.0:3", "4.0:2", "6.0:2", "1.0:0", "0.0:3"))
                .jsonPath("$.outputs[1].datatype").isEqualTo("INT64");
    }

    @Test
    void classificationBeyondTheRowsLengthReturnsTheWholeRowAndZeroMeansTheValues() {
        infer("doubler", """
                {"inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP32", "data": [1, 2, 3, 4]}],
                 "outputs": [{"name": "y", "parameters": {"classification": 100}}]}""")
                .expectStatus().isOk().expectBody()
                .jsonPath("$.outputs[0].shape").isEqualTo(List.of(1, 4))
                .jsonPath("$.outputs[0].data[3]").isEqualTo("2.0:0");
        infer("doubler", """
                {"inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP32", "data": [1, 2, 3, 4]}],
                 "outputs": [{"name": "y", "parameters": {"classification": 0}}]}""")
                .expectStatus().isOk().expectBody()
                .jsonPath("$.outputs[0].datatype").isEqualTo("FP32")
                .jsonPath("$.outputs[0].data").isEqualTo(List.of(2.0, 4.0, 6.0, 8.0));
    }

    @Test
    void classificationAsBinaryDataIsLengthPrefixedText() {
        EntityExchangeResult<byte[]> result = infer("doubler", """
                {"inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP32", "data": [1, 9, 3, 4]}],
                 "outputs": [{"name": "y", "parameters": {"classification": 1, "binary_data": true}}]}""")
                .expectStatus().isOk().expectBody(byte[].class).returnResult();
        int jsonLength = Integer.parseInt(result.getResponseHeaders().getFirst(InferenceHandler.HEADER_LENGTH));
        byte[] response = result.getResponseBody();
        String json = new String(response, 0, jsonLength, StandardCharsets.UTF_8);
        assertThat(json).contains("\"datatype\":\"BYTES\"").contains("\"shape\":[1,1]")
                .contains("\"binary_data_size\":10");
        ByteBuffer binary = ByteBuffer.wrap(response, jsonLength, response.length - jsonLength)
                .order(ByteOrder.LITTLE_ENDIAN);
        assertThat(binary.getInt()).isEqualTo(6);
        assertThat(new String(response, jsonLength + 4, 6, StandardCharsets.UTF_8)).isEqualTo("18.0:1");
    }

    @Test
    void aClassificationThatCannotBeMadeIs400NamingTheOutputAndLeavesNoMemoryBehind() {
        expectError(infer("echo", """
                {"inputs": [{"name": "bytes", "shape": [1], "datatype": "BYTES", "data": ["a"]}],
                 "outputs": [{"name": "bytes_out", "parameters": {"classification": 1}}]}"""),
                400, "output 'bytes_out' is BYTES; parameter 'classification' needs an output of numbers");
        for (String bad : List.of("-1", "1.5", "\"2\"", "true", "4294967296")) {
            expectError(infer("doubler", """
                    {"inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP32", "data": [1, 2, 3, 4]}],
                     "outputs": [{"name": "y", "parameters": {"classification": %s}}]}""".formatted(bad)),
                    400, "output 'y': parameter 'classification' must be a non-negative integer");
        }
        assertThat(fixture.model("doubler").invocations).as("refused before the model ran").hasValue(0);
        assertThat(fixture.allocators).allMatch(a -> a.allocatedBytes.get() == 0);
    }

    // ---- 400 ----

    @Test
    void aFractionalDimensionIs400NotTruncated() {
        expectError(infer("doubler", """
                {"inputs": [{"name": "x", "shape": [1.5, 4], "datatype": "FP32", "data": [1, 2, 3, 4]}]}"""),
                400, "malformed inference request JSON: inputs[0].shape[0] must be an integer");
        assertThat(fixture.model("doubler").invocations).hasValue(0);
    }

    @Test
    void validationErrorsAre400AndNameTheProblem() {
        expectError(infer("doubler", "{\"inputs\": [{\"name\": \"x\", "), 400, "malformed inference request JSON");
        expectError(infer("doubler", "{\"inputs\": []}"), 400, "has no inputs");
        expectError(infer("doubler", """
                {"inputs": [{"name": "z", "shape": [1, 4], "datatype": "FP32", "data": [1, 2, 3, 4]}]}"""),
                400, "unknown input 'z'");
        expectError(infer("doubler", """
                {"inputs": [{"name": "x", "shape": [1, 4], "datatype": "INT32", "data": [1, 2, 3, 4]}]}"""),
                400, "input 'x' has datatype INT32 but model 'doubler' expects FP32");
        expectError(infer("doubler", """
                {"inputs": [{"name": "x", "shape": [1, 4], "datatype": "UINT99", "data": [1, 2, 3, 4]}]}"""),
                400, "unsupported datatype 'UINT99'");
        expectError(infer("doubler", """
                {"inputs": [{"name": "x", "shape": [2, 4], "datatype": "FP32", "data": [1, 2, 3, 4]}]}"""),
                400, "shape needs 8 elements but 'data' holds 4");
        expectError(infer("doubler", """
                {"inputs": [{"name": "x", "shape": [1, 3], "datatype": "FP32", "data": [1, 2, 3]}]}"""),
                400, "dimension 1 must be 4");
        expectError(infer("doubler", """
                {"inputs": [{"name": "x", "shape": [9, 4], "datatype": "FP32", "data": [%s]}]}"""
                        .formatted("1,".repeat(35) + "1")), 400, "batch size 9 is outside 1..8");
        expectError(infer("tokens", """
                {"inputs": [{"name": "ids", "shape": [1, 17], "datatype": "INT64", "data": [%s]}]}"""
                        .formatted("1,".repeat(16) + "1")), 400, "sequence length 17 is outside 1..16");
        expectError(infer("tokens", """
                {"inputs": [{"name": "ids", "shape": [1, 2], "datatype": "INT64", "data": [1, 2.5]}]}"""),
                400, "element 1 (2.5) is not a valid INT64 value");
        expectError(infer("doubler", """
                {"inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP32", "data": [1, 2, 3, 4]}],
                 "outputs": [{"name": "nope"}]}"""), 400, "unknown output 'nope'");
        expectError(infer("doubler", """
                {"parameters": {"timeout": "soon"},
                 "inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP32", "data": [1, 2, 3, 4]}]}"""),
                400, "parameter 'timeout' must be a non-negative integer number of microseconds");
        assertThat(fixture.model("doubler").invocations).as("nothing reached the device").hasValue(0);
        assertThat(fixture.model("tokens").invocations).hasValue(0);
    }

    @Test
    void binaryLengthMismatchIs400() {
        byte[] json = """
                {"inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP32", "parameters": {"binary_data_size": 12}}]}"""
                .getBytes(StandardCharsets.UTF_8);
        byte[] body = java.util.Arrays.copyOf(json, json.length + 12);
        expectError(client().post().uri("/v2/models/doubler/infer")
                .header(InferenceHandler.HEADER_LENGTH, Integer.toString(json.length))
                .contentType(MediaType.APPLICATION_OCTET_STREAM).bodyValue(body).exchange(),
                400, "binary_data_size is 12 bytes but shape [1, 4] of FP32 needs 16");
        byte[] huge = """
                {"inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP32",
                             "parameters": {"binary_data_size": 18446744073709551616}}]}""".getBytes(StandardCharsets.UTF_8);
        expectError(client().post().uri("/v2/models/doubler/infer")
                .header(InferenceHandler.HEADER_LENGTH, Integer.toString(huge.length))
                .contentType(MediaType.APPLICATION_OCTET_STREAM).bodyValue(java.util.Arrays.copyOf(huge, huge.length + 16))
                .exchange(), 400, "binary_data_size must be a non-negative integer, was 18446744073709551616");
        expectError(client().post().uri("/v2/models/doubler/infer")
                .header(InferenceHandler.HEADER_LENGTH, "99999")
                .contentType(MediaType.APPLICATION_OCTET_STREAM).bodyValue(body).exchange(),
                400, "Inference-Header-Content-Length is 99999");
        expectError(client().post().uri("/v2/models/doubler/infer")
                .header(InferenceHandler.HEADER_LENGTH, Integer.toString(json.length - 5))
                .contentType(MediaType.APPLICATION_OCTET_STREAM).bodyValue(body).exchange(),
                400, "malformed inference request JSON (its first " + (json.length - 5) + " bytes, as header "
                        + "Inference-Header-Content-Length says; check that it counts the JSON exactly): ");
    }

    @Test
    void binaryBodyWithoutItsHeaderLengthSaysTheHeaderIsMissing() {
        byte[] json = """
                {"inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP32", "parameters": {"binary_data_size": 16}}]}"""
                .getBytes(StandardCharsets.UTF_8);
        ByteBuffer body = ByteBuffer.allocate(json.length + 16).order(ByteOrder.LITTLE_ENDIAN);
        body.put(json).putFloat(1).putFloat(-2).putFloat(3.5f).putFloat(0);
        expectError(client().post().uri("/v2/models/doubler/infer")
                .contentType(MediaType.APPLICATION_OCTET_STREAM).bodyValue(body.array()).exchange(),
                400, "no header Inference-Header-Content-Length");
        expectError(client().post().uri("/v2/models/doubler/infer")
                .contentType(MediaType.APPLICATION_JSON).bodyValue("{\"inputs\": [").exchange(),
                400, "malformed inference request JSON");
    }

    // ---- 413, 503, 504, 507, 500 ----

    @Test
    void bodyAboveTheLimitIs413() {
        fixture = ServingFixture.builder().maxBody(256).build();
        String big = """
                {"inputs": [{"name": "x", "shape": [8, 4], "datatype": "FP32", "data": [%s]}]}"""
                .formatted("1.000001,".repeat(31) + "1");
        WebTestClient.ResponseSpec response = infer("doubler", big);
        // the unread rest of the body makes the connection unusable: the server says so
        response.expectHeader().valueEquals(HttpHeaders.CONNECTION, "close");
        expectError(response, 413, "request body exceeds the limit of 256 bytes");
        assertThat(fixture.model("doubler").invocations).hasValue(0);
    }

    @Test
    void chunkedBodyWithoutContentLengthIsCutOffAt413() {
        fixture = ServingFixture.builder().maxBody(1024).build();
        reactor.core.publisher.Flux<String> chunks = reactor.core.publisher.Flux.range(0, 100)
                .map(i -> i == 0 ? "{\"inputs\": [{\"name\": \"x\", \"data\": [" : "1.0000000000, ");
        expectError(fixture.client.post().uri("/v2/models/doubler/infer").contentType(MediaType.APPLICATION_JSON)
                .body(org.springframework.web.reactive.function.BodyInserters.fromPublisher(chunks, String.class))
                .exchange(), 413, "exceeds the limit of 1024 bytes");
        assertThat(fixture.model("doubler").invocations).hasValue(0);
    }

    @Test
    void fullQueueIs503WithRetryAfter() throws Exception {
        fixture = ServingFixture.builder().streams(1).queue(1).build();
        TestModel doubler = fixture.model("doubler");
        CountDownLatch release = new CountDownLatch(1);
        CountDownLatch started = new CountDownLatch(1);
        doubler.gate = () -> {
            started.countDown();
            await(release);
        };
        DeviceWorker worker = fixture.runtimes.getFirst().worker();
        Disposable running = worker.submit(ctx -> doubler.infer(maxDoublerInput(), java.util.Set.of(), ctx)).subscribe();
        assertThat(started.await(5, TimeUnit.SECONDS)).isTrue();
        Disposable queued = worker.submit(ctx -> "queued").subscribe();
        assertThat(worker.queueDepth()).isEqualTo(1);

        infer("doubler", """
                {"inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP32", "data": [1, 2, 3, 4]}]}""")
                .expectStatus().isEqualTo(503)
                .expectHeader().valueEquals(HttpHeaders.RETRY_AFTER, "1")
                .expectBody().jsonPath("$.error").value(containsString("overloaded"));
        release.countDown();
        running.dispose();
        queued.dispose();
    }

    @Test
    void requestTimeoutParameterIsMicrosecondsAnd504() {
        fixture = ServingFixture.builder().streams(1).build();
        CountDownLatch release = new CountDownLatch(1);
        fixture.model("doubler").gate = () -> await(release);
        expectError(infer("doubler", """
                {"parameters": {"timeout": 50000},
                 "inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP32", "data": [1, 2, 3, 4]}]}"""),
                504, "within its timeout of 50000 µs");
        release.countDown();
        waitFor(() -> fixture.allocatedBytes() == 0 && fixture.runtimes.getFirst().worker().inFlight() == 0);
    }

    @Test
    void serverDefaultTimeoutAppliesWithoutParameter() {
        fixture = ServingFixture.builder().streams(1).timeout(Duration.ofMillis(100)).build();
        CountDownLatch release = new CountDownLatch(1);
        fixture.model("doubler").gate = () -> await(release);
        expectError(infer("doubler", """
                {"inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP32", "data": [1, 2, 3, 4]}]}"""),
                504, "within its timeout of 100000 µs");
        release.countDown();
    }

    @Test
    void outOfDeviceMemoryIs507() {
        // The request below needs 8 × 4 × 4 + 1 = 129 bytes of device memory; the device has 100.
        fixture = ServingFixture.builder().memoryLimit(100).noWarmUp().build();
        fixture.registry.models().forEach(ServedModel::markReady);
        String body = """
                {"inputs": [{"name": "x", "shape": [8, 4], "datatype": "FP32", "data": [%s]}]}"""
                .formatted("1,".repeat(31) + "1");
        infer("doubler", body).expectStatus().isEqualTo(507).expectBody().jsonPath("$.error")
                .value(containsString("out of device memory: requested 129 bytes"));
        assertThat(fixture.allocatedBytes()).isZero();
    }

    @Test
    void outOfMemoryFromTheRealPoolAfterItsRecoveryIs507() {
        fixture = ServingFixture.builder().realPool(4 * io.gpupool.memory.PoolConfig.MIB).build();
        fixture.model("doubler").extraBytes = 8 * io.gpupool.memory.PoolConfig.MIB;
        infer("doubler", """
                {"inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP32", "data": [1, 2, 3, 4]}]}""")
                .expectStatus().isEqualTo(507).expectBody().jsonPath("$.error")
                .value(containsString("out of device memory"));
        assertThat(fixture.allocatedBytes()).isZero();
        fixture.model("doubler").extraBytes = 0;
        infer("doubler", """
                {"inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP32", "data": [1, 2, 3, 4]}]}""")
                .expectStatus().isOk();
        assertThat(fixture.pools.getFirst().metrics().counters().recoveries()).isPositive();
    }

    @Test
    void unexpectedFailureIs500() {
        fixture = ServingFixture.builder().build();
        fixture.model("doubler").gate = () -> {
            throw new IllegalStateException("kernel table corrupt");
        };
        expectError(infer("doubler", """
                {"inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP32", "data": [1, 2, 3, 4]}]}"""),
                500, "kernel table corrupt");
        assertThat(fixture.allocatedBytes()).isZero();
    }

    @Test
    void modelRejectingItsInputIs400() {
        fixture = ServingFixture.builder().build();
        fixture.model("doubler").gate = () -> {
            throw new IllegalArgumentException("token id 500 is outside the vocabulary of 100");
        };
        expectError(infer("doubler", """
                {"inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP32", "data": [1, 2, 3, 4]}]}"""),
                400, "model 'doubler' rejected the request: token id 500");
    }

    @Test
    void everyInferenceRequestIsReportedOnceWithItsOutcome() {
        java.util.List<String> events = java.util.Collections.synchronizedList(new java.util.ArrayList<>());
        fixture = ServingFixture.builder().observer(new InferenceObserver() {
            @Override
            public Tracker enqueued(String model, int device) {
                events.add("enqueued " + model + " on " + device);
                return new Tracker() {
                    @Override
                    public void started() {
                        events.add("started " + model);
                    }

                    @Override
                    public void finished(int status) {
                        events.add("finished " + model + " " + status);
                    }
                };
            }

            @Override
            public void rejected(String model, int status) {
                events.add("rejected " + model + " " + status);
            }
        }).build();
        String ok = """
                {"inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP32", "data": [1, 2, 3, 4]}]}""";
        infer("doubler", ok).expectStatus().isOk();
        infer("doubler", "{\"inputs\": []}").expectStatus().isBadRequest();
        infer("nope", ok).expectStatus().isNotFound();
        assertThat(events).containsExactly("enqueued doubler on 0", "started doubler", "finished doubler 200",
                "rejected doubler 400", "rejected null 404");
    }

    @Test
    void requestGoesToTheLeastLoadedDevice() throws Exception {
        fixture = ServingFixture.builder().devices(2).streams(1).build();
        CountDownLatch release = new CountDownLatch(1);
        CountDownLatch started = new CountDownLatch(1);
        DeviceWorker device0 = fixture.runtimes.get(0).worker();
        Disposable busy = device0.submit(ctx -> {
            started.countDown();
            await(release);
            return "busy";
        }).subscribe();
        assertThat(started.await(5, TimeUnit.SECONDS)).isTrue();
        infer("doubler", """
                {"inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP32", "data": [1, 2, 3, 4]}]}""")
                .expectStatus().isOk();
        assertThat(fixture.models.get("doubler").get(1).invocations).hasValue(1);
        assertThat(fixture.models.get("doubler").get(0).invocations).hasValue(0);
        release.countDown();
        busy.dispose();
    }

    private static java.util.List<io.gpupool.model.HostTensor> maxDoublerInput() {
        return java.util.List.of(new io.gpupool.model.HostTensor("x", io.gpupool.model.DataType.FP32, new long[]{1, 4},
                java.lang.foreign.MemorySegment.ofArray(new float[4])));
    }

    static void await(CountDownLatch latch) {
        try {
            if (!latch.await(10, TimeUnit.SECONDS)) {
                throw new IllegalStateException("test latch not released");
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException(e);
        }
    }

    /**
     * Polls {@code condition} until it holds. Bounded generously: the bound only matters when the condition never
     * comes true, and on a loaded 2-core build machine a released stream or ticket can take seconds to show.
     */
    static void waitFor(java.util.function.BooleanSupplier condition) {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        while (!condition.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError("condition not met within 20 s");
            }
            sleepBriefly();
        }
    }

    /** Polling pause: the build machine has two shared cores, so waiting must not spin. */
    static void sleepBriefly() {
        try {
            Thread.sleep(20);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException(e);
        }
    }
}
