package io.gpupool.serving;

/**
 * A finished inference response, already serialised on the worker thread.
 *
 * @param body       JSON, followed by the binary section when {@code jsonLength < body.length}
 * @param jsonLength bytes of JSON at the start of {@code body} (the Inference-Header-Content-Length)
 */
public record EncodedResponse(byte[] body, int jsonLength) {

    /** True when binary output data follows the JSON. */
    public boolean hasBinary() {
        return jsonLength < body.length;
    }
}
