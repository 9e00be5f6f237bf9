package io.gpupool.actuate;

/** How an inference request ended: the {@code outcome} tag of {@code gpupool.inference.requests}. */
public enum InferenceOutcome {
    SUCCESS, BAD_REQUEST, NOT_FOUND, TOO_LARGE, OVERLOADED, TIMEOUT, OUT_OF_MEMORY, CANCELLED, ERROR;

    /** The tag value, e.g. {@code out_of_memory}. */
    public String tag() {
        return name().toLowerCase(java.util.Locale.ROOT);
    }

    /** Maps the HTTP status that was answered (cancelled requests have none: use {@link #CANCELLED}). */
    public static InferenceOutcome ofStatus(int status) {
        return switch (status) {
            case 200 -> SUCCESS;
            case 400 -> BAD_REQUEST;
            case 404 -> NOT_FOUND;
            case 413 -> TOO_LARGE;
            case 429, 503 -> OVERLOADED;
            case 504 -> TIMEOUT;
            case 507 -> OUT_OF_MEMORY;
            default -> status >= 200 && status < 300 ? SUCCESS : ERROR;
        };
    }
}
