package io.gpupool.model;

import java.util.List;

/**
 * What a served model tells clients about itself and what requests are checked against: its name,
 * version and platform, its tensors, and its limits.
 *
 * @param maxBatchSize      largest batch accepted; larger requests are refused before any device memory
 *                          is touched
 * @param maxSequenceLength largest sequence length accepted, or 0 for a model without a sequence
 *                          dimension
 */
public record ModelSignature(String name, String version, String platform, List<TensorSpec> inputs,
                             List<TensorSpec> outputs, int maxBatchSize, int maxSequenceLength) {

    public ModelSignature {
        inputs = List.copyOf(inputs);
        outputs = List.copyOf(outputs);
    }

    /** The signature of a model from the repository: name, version and batch limit from its config. */
    public static ModelSignature of(ModelConfig config, String platform, List<TensorSpec> inputs,
                                    List<TensorSpec> outputs, int maxSequenceLength) {
        return new ModelSignature(config.name(), config.serving().version(), platform, inputs, outputs,
                config.serving().maxBatchSize(), maxSequenceLength);
    }
}
