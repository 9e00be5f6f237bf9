package io.gpupool.serving;

import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.springframework.http.HttpHeaders;
import org.springframework.http.MediaType;
import org.springframework.test.web.reactive.server.WebTestClient;
import tools.jackson.databind.JsonNode;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The JSON bodies the server sends, and the request bodies the README shows, match the protocol's
 * OpenAPI file ({@code shared/specs/open_inference_rest.yaml}), which the clients are written against.
 * CI lays {@code shared/} beside the clone; without it (and outside CI) the test is skipped.
 */
class OpenApiBodiesTest {

    private static OpenApiSchemas spec;
    private static ServingFixture fixture;

    @BeforeAll
    static void setUp() throws IOException {
        spec = OpenApiSchemas.find();
        if (spec == null && System.getenv("CI") != null) {
            throw new IllegalStateException("shared/specs/open_inference_rest.yaml is missing beside the clone");
        }
        Assumptions.assumeTrue(spec != null, "no shared/specs/open_inference_rest.yaml beside the working tree");
        fixture = ServingFixture.builder().maxBody(64 * 1024).build();
    }

    @AfterAll
    static void tearDown() {
        if (fixture != null) {
            fixture.close();
        }
    }

    private static void matches(String schema, WebTestClient.ResponseSpec response) throws IOException {
        if (schema.equals("inference_response")) {
            response.expectStatus().isOk();
        }
        byte[] body = response.expectHeader().contentType(MediaType.APPLICATION_JSON).expectBody()
                .returnResult().getResponseBody();
        JsonNode json = ServingFixture.JSON.readTree(body);
        assertThat(spec.violations(schema, json)).as("%s: %s", schema, json).isEmpty();
    }

    private static WebTestClient.ResponseSpec infer(String model, String json) {
        return fixture.client.post().uri("/v2/models/" + model + "/infer").contentType(MediaType.APPLICATION_JSON)
                .bodyValue(json).exchange();
    }

    @Test
    void metadataBodies() throws IOException {
        matches("metadata_server_response", fixture.client.get().uri("/v2").exchange());
        for (String model : new String[]{"doubler", "echo", "tokens"}) {
            matches("metadata_model_response", fixture.client.get().uri("/v2/models/" + model).exchange());
        }
        matches("metadata_model_error_response", fixture.client.get().uri("/v2/models/nope").exchange());
    }

    @Test
    void inferenceBodies() throws IOException {
        matches("inference_response", infer("doubler", """
                {"id": "a", "inputs": [{"name": "x", "shape": [2, 4], "datatype": "FP32", "data": [1, 2, 3, 4, 5, 6, 7, 8]}]}"""));
        matches("inference_response", infer("echo", """
                {"inputs": [{"name": "bytes", "shape": [2], "datatype": "BYTES", "data": ["hello", "world"]},
                            {"name": "bool", "shape": [2], "datatype": "BOOL", "data": [true, false]}],
                 "outputs": [{"name": "bytes_out"}, {"name": "bool_out"}]}"""));
        matches("inference_response", fixture.client.post().uri("/v2/models/doubler/infer")
                .contentType(MediaType.APPLICATION_OCTET_STREAM).header(InferenceHandler.HEADER_LENGTH, "0")
                .bodyValue(new byte[16]).exchange());
        matches("inference_response", fixture.client.post().uri("/v2/models/doubler/infer")
                .contentType(MediaType.APPLICATION_JSON).header(HttpHeaders.CONTENT_ENCODING, "gzip")
                .bodyValue(ProtocolExtensionsTest.gzip("""
                        {"inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP32", "data": [1, 2, 3, 4]}]}"""
                        .getBytes(java.nio.charset.StandardCharsets.UTF_8))).exchange());
    }

    @Test
    void errorBodies() throws IOException {
        matches("inference_error_response", infer("doubler", "{\"inputs\": [{\"name\": \"q\"}]}"));
        matches("inference_error_response", infer("nope", "{}"));
        matches("inference_error_response", fixture.client.delete().uri("/v2/models/doubler/infer").exchange());
        matches("inference_error_response", fixture.client.post().uri("/v2/models/doubler/infer")
                .contentType(MediaType.APPLICATION_JSON).bodyValue(new byte[65 * 1024]).exchange());
        matches("inference_error_response", fixture.client.post().uri("/v2/models/doubler/infer")
                .contentType(MediaType.APPLICATION_JSON).header(HttpHeaders.CONTENT_ENCODING, "br").bodyValue("{}")
                .exchange());
        matches("metadata_server_error_response", fixture.client.post().uri("/v2/systemsharedmemory/region/r/register")
                .contentType(MediaType.APPLICATION_JSON).bodyValue("{}").exchange());
    }

    @Test
    void theReadmesInferenceRequestsAreValidRequests() throws IOException {
        String readme = Files.readString(Path.of("README.md"));
        Matcher curl = Pattern.compile("/infer\\b[^\\n]*?(?:\\\\\\n[^\\n]*?)*?-d '([^']*)'", Pattern.DOTALL).matcher(readme);
        List<String> checked = new ArrayList<>();
        while (curl.find()) {
            String body = curl.group(1).trim();
            if (body.equals("{}")) {
                continue;   // the unknown-model example: its point is the 404
            }
            JsonNode json = ServingFixture.JSON.readTree(body);
            assertThat(spec.violations("inference_request", json)).as("README request %s", body).isEmpty();
            checked.add(body);
        }
        assertThat(checked).as("README inference examples found").hasSizeGreaterThanOrEqualTo(4);
    }
}
