package io.gpupool.actuate;

/**
 * One served model's statistics as the meters read them (Triton's statistics extension, plus device
 * memory); the serving wiring implements it over the model's own counters. Reads never block.
 */
public interface ModelFigures {

    String version();

    /** Rows inferred by successful requests. */
    long inferenceCount();

    /** Forwards of the model (one per request, fewer when requests are batched together). */
    long executionCount();

    /** Count and total nanoseconds of {@code phase}. */
    long count(Phase phase);

    long nanos(Phase phase);

    long weightBytes();

    long weightPeakBytes();

    long requestBytes();

    long requestPeakBytes();

    /** The timed phases, as Triton names them. */
    enum Phase {
        SUCCESS("success"), FAIL("fail"), QUEUE("queue"), COMPUTE_INPUT("compute_input"),
        COMPUTE_INFER("compute_infer"), COMPUTE_OUTPUT("compute_output");

        private final String tag;

        Phase(String tag) {
            this.tag = tag;
        }

        public String tag() {
            return tag;
        }
    }
}
