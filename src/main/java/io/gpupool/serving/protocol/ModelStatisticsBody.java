package io.gpupool.serving.protocol;

import com.fasterxml.jackson.annotation.JsonProperty;

import java.util.List;

/**
 * {@code GET /v2/models[/{m}[/versions/{v}]]/stats}: Triton's statistics extension, field for field,
 * plus {@code gpupool_memory} (device bytes of weights and of running requests, now and at peak).
 */
public record ModelStatisticsBody(@JsonProperty("model_stats") List<ModelStats> modelStats) {

    /** One model's figures. {@code last_inference} is in milliseconds since the epoch, 0 before the first. */
    public record ModelStats(String name, String version,
                             @JsonProperty("last_inference") long lastInference,
                             @JsonProperty("inference_count") long inferenceCount,
                             @JsonProperty("execution_count") long executionCount,
                             @JsonProperty("inference_stats") InferenceStats inferenceStats,
                             @JsonProperty("batch_stats") List<BatchStats> batchStats,
                             @JsonProperty("memory_usage") List<MemoryUsage> memoryUsage,
                             @JsonProperty("gpupool_memory") DeviceMemory deviceMemory) {
    }

    /** Count and total nanoseconds of one kind of event. */
    public record Duration(long count, long ns) {
    }

    /** Per-request figures; the cache is never used (the server has no response cache). */
    public record InferenceStats(Duration success, Duration fail, Duration queue,
                                 @JsonProperty("compute_input") Duration computeInput,
                                 @JsonProperty("compute_infer") Duration computeInfer,
                                 @JsonProperty("compute_output") Duration computeOutput,
                                 @JsonProperty("cache_hit") Duration cacheHit,
                                 @JsonProperty("cache_miss") Duration cacheMiss) {
    }

    /** The executions of exactly {@code batch_size} rows. */
    public record BatchStats(@JsonProperty("batch_size") int batchSize,
                             @JsonProperty("compute_input") Duration computeInput,
                             @JsonProperty("compute_infer") Duration computeInfer,
                             @JsonProperty("compute_output") Duration computeOutput) {
    }

    /** Triton's per-device weight memory: {@code type} is {@code GPU} on CUDA, {@code CPU} on the host backend. */
    public record MemoryUsage(String type, int id, @JsonProperty("byte_size") long byteSize) {
    }

    /**
     * Device bytes held by the model: its weights on all devices, and the planned peak of the requests
     * computing now; each with the highest value seen since the model was loaded.
     */
    public record DeviceMemory(@JsonProperty("weights_bytes") long weightsBytes,
                               @JsonProperty("weights_peak_bytes") long weightsPeakBytes,
                               @JsonProperty("requests_bytes") long requestsBytes,
                               @JsonProperty("requests_peak_bytes") long requestsPeakBytes) {
    }
}
