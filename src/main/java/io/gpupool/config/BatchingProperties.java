package io.gpupool.config;

import io.gpupool.serving.BatchPolicy;
import org.springframework.boot.context.properties.ConfigurationProperties;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

/**
 * {@code gpupool.batching.*}: the server-wide defaults of dynamic batching. A model's config.json may turn it on
 * or off and override every value in its {@code gpupool.dynamic_batching} field; these apply where it does not.
 * Kept apart from {@link GpuPoolProperties} so that it can grow without touching the serving settings.
 */
@ConfigurationProperties("gpupool.batching")
public class BatchingProperties {

    /** Whether models whose config.json has no dynamic_batching field batch concurrent requests. */
    private boolean enabled = false;

    /**
     * How long the oldest waiting request may be held, once a stream is free, for others to join its batch
     * (Triton's max_queue_delay_microseconds); 0: dispatch what waits as soon as a stream is free.
     */
    private Duration maxQueueDelay = Duration.ofNanos(100_000);

    /** Most requests in one batched forward. */
    private int maxRequests = 32;

    /** Most tokens (batch x sequence, summed; rows for models without a sequence axis) in one batched forward. */
    private int maxTokens = 8192;

    /** Batch sizes (summed batch rows) dispatched at once without waiting out the delay; empty: none. */
    private List<Integer> preferredBatchSizes = new ArrayList<>();

    /**
     * Most batches of one model running at once on a device; 0: one per stream (gpupool.serving.streams-per-device).
     * Fewer than the streams makes each batch larger under load, since requests gather while the batches run, and
     * leaves the other streams to requests that run alone; each batch costs host time of its own, so fewer, larger
     * batches serve more (why two: docs/benchmarks.md, "Batches in flight").
     */
    private int maxBatchesInFlight = 2;

    /** The validated defaults; a bad value names its property. */
    BatchPolicy.Defaults toDefaults() {
        try {
            return new BatchPolicy.Defaults(enabled, maxQueueDelay, maxRequests, maxTokens, preferredBatchSizes);
        } catch (IllegalArgumentException | NullPointerException e) {
            throw new IllegalArgumentException("gpupool.batching: " + e.getMessage()
                    + " (max-queue-delay in [0, 10s], max-requests in [1, 4096], max-tokens >= 1,"
                    + " preferred-batch-sizes >= 1)", e);
        }
    }

    /** The validated {@link #maxBatchesInFlight}. */
    int batchesPerDevice() {
        if (maxBatchesInFlight < 0) {
            throw new IllegalArgumentException("gpupool.batching.max-batches-in-flight = " + maxBatchesInFlight
                    + " is invalid; allowed: >= 0 (0: one per stream)");
        }
        return maxBatchesInFlight;
    }

    public boolean isEnabled() { return enabled; }
    public void setEnabled(boolean enabled) { this.enabled = enabled; }
    public Duration getMaxQueueDelay() { return maxQueueDelay; }
    public void setMaxQueueDelay(Duration maxQueueDelay) { this.maxQueueDelay = maxQueueDelay; }
    public int getMaxRequests() { return maxRequests; }
    public void setMaxRequests(int maxRequests) { this.maxRequests = maxRequests; }
    public int getMaxTokens() { return maxTokens; }
    public void setMaxTokens(int maxTokens) { this.maxTokens = maxTokens; }
    public List<Integer> getPreferredBatchSizes() { return preferredBatchSizes; }
    public void setPreferredBatchSizes(List<Integer> preferredBatchSizes) { this.preferredBatchSizes = preferredBatchSizes; }
    public int getMaxBatchesInFlight() { return maxBatchesInFlight; }
    public void setMaxBatchesInFlight(int maxBatchesInFlight) { this.maxBatchesInFlight = maxBatchesInFlight; }
}
