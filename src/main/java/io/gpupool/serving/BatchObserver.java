package io.gpupool.serving;

/**
 * What every forward reports, batched or not, for metrics (Micrometer lives outside this package; the configuration adapts
 * it). Called from device worker threads; must not block.
 */
public interface BatchObserver {

    BatchObserver NONE = new BatchObserver() {
    };

    /**
     * One forward of {@code model} started for {@code requests} requests (1 without batching) carrying
     * {@code rows} batch rows and {@code tokens} tokens.
     */
    default void executed(String model, int requests, int rows, int tokens) {
    }

    /** A request of {@code model} waited {@code nanos} in its batch queue before its forward started. */
    default void queueDelay(String model, long nanos) {
    }

    /** A request of {@code model} ran at once, outside its batch queue, because it filled a batch alone. */
    default void bypassed(String model) {
    }
}
