package io.gpupool.model;

/**
 * A model folder that cannot be served: a config field out of range, a safetensors file that is
 * truncated or whose header lies, a tensor that is missing, unexpected or of the wrong shape. The
 * message names the file, the field or tensor, the value found and what was expected.
 */
public class ModelFormatException extends RuntimeException {

    public ModelFormatException(String message) {
        super(message);
    }

    public ModelFormatException(String message, Throwable cause) {
        super(message, cause);
    }
}
