package io.gpupool.serving.protocol;

/** Every error the protocol endpoints return: {@code {"error": "<message naming the problem>"}}. */
public record ErrorBody(String error) {
}
