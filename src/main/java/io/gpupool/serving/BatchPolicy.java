package io.gpupool.serving;

import io.gpupool.model.ModelConfig;

import java.time.Duration;
import java.util.Arrays;
import java.util.List;

/**
 * How one model's requests are batched, resolved once from its config.json {@code dynamic_batching} field over
 * the server's defaults ({@code gpupool.batching.*}) and validated.
 *
 * @param maxQueueDelay       how long the oldest waiting request may be held for others to join its batch once a
 *                            stream is free (Triton's {@code max_queue_delay_microseconds}); zero: dispatch what is
 *                            waiting as soon as a stream is free
 * @param maxRequests         most requests in one forward
 * @param maxTokens           most tokens (Σ batch × sequence; rows for a model without a sequence axis) in one forward;
 *                            a single request above it still runs, alone
 * @param preferredBatchSizes batch sizes (Σ batch rows) dispatched at once, without waiting out the delay; ascending
 */
public record BatchPolicy(Duration maxQueueDelay, int maxRequests, int maxTokens, int[] preferredBatchSizes) {

    public BatchPolicy {
        if (maxQueueDelay == null || maxQueueDelay.isNegative() || maxQueueDelay.compareTo(Duration.ofSeconds(10)) > 0) {
            throw new IllegalArgumentException("max queue delay = " + maxQueueDelay + " is invalid; allowed: [0, 10s]");
        }
        if (maxRequests < 1 || maxRequests > 4096) {
            throw new IllegalArgumentException("max requests per batch = " + maxRequests + " is invalid; allowed: [1, 4096]");
        }
        if (maxTokens < 1) {
            throw new IllegalArgumentException("max tokens per batch = " + maxTokens + " is invalid; allowed: >= 1");
        }
        preferredBatchSizes = preferredBatchSizes.clone();
        Arrays.sort(preferredBatchSizes);
        for (int size : preferredBatchSizes) {
            if (size < 1) {
                throw new IllegalArgumentException("preferred batch size " + size + " is invalid; allowed: >= 1");
            }
        }
    }

    @Override
    public int[] preferredBatchSizes() {
        return preferredBatchSizes.clone();
    }

    /** The server-wide defaults: whether a model without a {@code dynamic_batching} field batches, and how. */
    public record Defaults(boolean enabled, Duration maxQueueDelay, int maxRequests, int maxTokens,
                           List<Integer> preferredBatchSizes) {

        public Defaults {
            preferredBatchSizes = List.copyOf(preferredBatchSizes);
            new BatchPolicy(maxQueueDelay, maxRequests, maxTokens, toArray(preferredBatchSizes));
        }

        /** Batching off for every model that does not turn it on itself. */
        public static Defaults off() {
            return new Defaults(false, Duration.ofMillis(0), 32, 8192, List.of());
        }

        /**
         * The policy of a model with {@code batching} in its config.json, or null when that model does not batch.
         *
         * @throws IllegalArgumentException when the resolved values are invalid, naming the model
         */
        public BatchPolicy resolve(String model, ModelConfig.Batching batching) {
            boolean on = batching.enabled() != null ? batching.enabled() : enabled;
            if (!on) {
                return null;
            }
            Duration delay = batching.maxQueueDelayMicros() != null
                    ? Duration.ofNanos(batching.maxQueueDelayMicros() * 1_000) : maxQueueDelay;
            int requests = batching.maxRequests() != null ? batching.maxRequests() : maxRequests;
            int tokens = batching.maxTokens() != null ? batching.maxTokens() : maxTokens;
            List<Integer> preferred = batching.preferredBatchSizes().isEmpty() ? preferredBatchSizes
                    : batching.preferredBatchSizes();
            try {
                return new BatchPolicy(delay, requests, tokens, toArray(preferred));
            } catch (IllegalArgumentException e) {
                throw new IllegalArgumentException("model '" + model + "': dynamic batching: " + e.getMessage(), e);
            }
        }

        private static int[] toArray(List<Integer> sizes) {
            return sizes.stream().mapToInt(Integer::intValue).toArray();
        }
    }

    @Override
    public boolean equals(Object other) {
        return other instanceof BatchPolicy that && maxQueueDelay.equals(that.maxQueueDelay)
                && maxRequests == that.maxRequests && maxTokens == that.maxTokens
                && Arrays.equals(preferredBatchSizes, that.preferredBatchSizes);
    }

    @Override
    public int hashCode() {
        return (maxQueueDelay.hashCode() * 31 + maxRequests) * 31 + maxTokens + Arrays.hashCode(preferredBatchSizes);
    }

    @Override
    public String toString() {
        return "BatchPolicy[maxQueueDelay=" + maxQueueDelay + ", maxRequests=" + maxRequests + ", maxTokens=" + maxTokens
                + ", preferredBatchSizes=" + Arrays.toString(preferredBatchSizes) + "]";
    }
}
