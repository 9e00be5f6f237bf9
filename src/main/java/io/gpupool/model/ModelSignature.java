package io.gpupool.model;

import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * What a served model tells clients about itself and what requests are checked against: its name,
 * version and platform, its tensors, and its limits.
 *
 * @param maxBatchSize      largest batch accepted; larger requests are refused before any device memory
 *                          is touched
 * @param maxSequenceLength largest sequence length accepted, or 0 for a model without a sequence
 *                          dimension
 * @param classLabels       per output whose last dimension indexes classes, the name of each class in index
 *                          order (the classification extension appends it to each result); other outputs absent
 */
public record ModelSignature(String name, String version, String platform, List<TensorSpec> inputs,
                             List<TensorSpec> outputs, int maxBatchSize, int maxSequenceLength,
                             Map<String, List<String>> classLabels) {

    public ModelSignature {
        inputs = List.copyOf(inputs);
        outputs = List.copyOf(outputs);
        classLabels = Map.copyOf(classLabels);
    }

    /** A signature whose outputs name no classes. */
    public ModelSignature(String name, String version, String platform, List<TensorSpec> inputs,
                          List<TensorSpec> outputs, int maxBatchSize, int maxSequenceLength) {
        this(name, version, platform, inputs, outputs, maxBatchSize, maxSequenceLength, Map.of());
    }

    /** The names of the classes {@code output}'s last dimension indexes, or an empty list where it names none. */
    public List<String> classLabels(String output) {
        return classLabels.getOrDefault(output, List.of());
    }

    /** This signature with {@code labels} naming the classes of {@code output}. */
    public ModelSignature withClassLabels(String output, List<String> labels) {
        Map<String, List<String>> all = new HashMap<>(classLabels);
        all.put(output, List.copyOf(labels));
        return new ModelSignature(name, version, platform, inputs, outputs, maxBatchSize, maxSequenceLength, all);
    }

    /** The signature of a model from the repository: name, version and batch limit from its config. */
    public static ModelSignature of(ModelConfig config, String platform, List<TensorSpec> inputs,
                                    List<TensorSpec> outputs, int maxSequenceLength) {
        return new ModelSignature(config.name(), config.serving().version(), platform, inputs, outputs,
                config.serving().maxBatchSize(), maxSequenceLength);
    }
}
