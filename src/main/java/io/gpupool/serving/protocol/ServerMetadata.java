package io.gpupool.serving.protocol;

import java.util.List;

/** The body of {@code GET /v2}: the server's name, version and the protocol extensions it speaks. */
public record ServerMetadata(String name, String version, List<String> extensions) {
}
