package io.gpupool.serving.protocol;

import com.fasterxml.jackson.annotation.JsonInclude;

/**
 * Bodies of the health endpoints. KServe's client reads the {@code live}/{@code ready} flag, Triton's
 * the status code; {@code error} says why not, as in every other error body.
 */
public final class Health {

    public static final Live LIVE = new Live(true);
    public static final Readiness READY = new Readiness(true, null);

    private Health() {
    }

    public static Readiness notReady(String why) {
        return new Readiness(false, why);
    }

    /** {@code GET /v2/health/live}. */
    public record Live(boolean live) {
    }

    /** {@code GET /v2/health/ready}. */
    @JsonInclude(JsonInclude.Include.NON_NULL)
    public record Readiness(boolean ready, String error) {
    }

    /** {@code GET /v2/models/{m}/ready}. */
    @JsonInclude(JsonInclude.Include.NON_NULL)
    public record ModelReadiness(String name, boolean ready, String error) {
    }
}
