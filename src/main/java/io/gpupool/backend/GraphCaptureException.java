package io.gpupool.backend;

/** A capture the device refused or that broke the rules of {@link GraphCapture}; nothing was kept. */
public class GraphCaptureException extends RuntimeException {

    public GraphCaptureException(String message) {
        super(message);
    }

    public GraphCaptureException(String message, Throwable cause) {
        super(message, cause);
    }
}
