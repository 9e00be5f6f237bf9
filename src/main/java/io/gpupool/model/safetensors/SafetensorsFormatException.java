package io.gpupool.model.safetensors;

/**
 * A safetensors file that cannot be read: truncated, or with a header that lies about its tensors. The
 * message names the file, the tensor, the value found and what was expected; the model repository
 * reports it as the reason a model is not served.
 */
public class SafetensorsFormatException extends RuntimeException {

    public SafetensorsFormatException(String message) {
        super(message);
    }

    public SafetensorsFormatException(String message, Throwable cause) {
        super(message, cause);
    }
}
