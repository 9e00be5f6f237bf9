package io.gpupool.serving.protocol;

import com.fasterxml.jackson.annotation.JsonInclude;
import com.fasterxml.jackson.annotation.JsonProperty;

import java.util.List;

/**
 * {@code GET /v2/models/{m}/config}: the fields of Triton's model configuration that describe a
 * gpupool model. As in Triton, {@code dims} leave out the batch dimension when {@code max_batch_size > 0}.
 */
@JsonInclude(JsonInclude.Include.NON_NULL)
public record ModelConfigBody(String name, String platform, String backend,
                              @JsonProperty("version_policy") VersionPolicy versionPolicy,
                              @JsonProperty("max_batch_size") int maxBatchSize,
                              List<Tensor> input, List<Tensor> output,
                              @JsonProperty("instance_group") List<InstanceGroup> instanceGroup,
                              @JsonProperty("dynamic_batching") Object dynamicBatching,
                              Parameters parameters) {

    /** One input or output: {@code data_type} is Triton's {@code TYPE_*} name. */
    public record Tensor(String name, @JsonProperty("data_type") String dataType, long[] dims) {
    }

    /** One version is served: the latest. */
    public record VersionPolicy(Latest latest) {
    }

    public record Latest(@JsonProperty("num_versions") int numVersions) {
    }

    /** The streams of each device that holds a replica. */
    public record InstanceGroup(String name, String kind, int count, List<Integer> gpus) {
    }

    /** Model-specific settings, as Triton's {@code parameters} map of {@code string_value}s. */
    @JsonInclude(JsonInclude.Include.NON_NULL)
    public record Parameters(@JsonProperty("max_sequence_length") StringValue maxSequenceLength) {
    }

    public record StringValue(@JsonProperty("string_value") String stringValue) {
    }
}
