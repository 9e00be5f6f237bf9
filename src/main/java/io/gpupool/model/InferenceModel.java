package io.gpupool.model;

import java.util.List;
import java.util.Optional;
import java.util.Set;

/**
 * A model loaded on one device and ready to serve. Implementations are immutable and safe to use
 * from many requests at once, each with its own {@link ExecutionContext}.
 */
public interface InferenceModel extends AutoCloseable {

    /** Name, version, platform, tensors and limits; the accessors below read it. */
    ModelSignature signature();

    default String name() {
        return signature().name();
    }

    default String version() {
        return signature().version();
    }

    /** Platform string for metadata, e.g. "gpupool_bert" or "gpupool_mlp". */
    default String platform() {
        return signature().platform();
    }

    default List<TensorSpec> inputs() {
        return signature().inputs();
    }

    default List<TensorSpec> outputs() {
        return signature().outputs();
    }

    /** Largest batch accepted; requests above it are rejected before any device memory is touched. */
    default int maxBatchSize() {
        return signature().maxBatchSize();
    }

    /** Largest sequence length accepted, or 0 for models without a sequence dimension. */
    default int maxSequenceLength() {
        return signature().maxSequenceLength();
    }

    /**
     * Runs the model. {@code inputs} are already validated against {@link #inputs()} (names, types,
     * shapes). Returns the outputs named in {@code requestedOutputs}, or all outputs when it is empty.
     * Synchronises {@code context.stream()} before returning; all device memory taken is released.
     */
    List<HostTensor> infer(List<HostTensor> inputs, Set<String> requestedOutputs, ExecutionContext context);

    /** Bytes of device memory the weights of this replica occupy (0 where unknown). */
    default long weightBytes() {
        return 0;
    }

    /**
     * How to run this model at a padded shape (for graphs captured per shape bucket); empty when it
     * cannot, and then it is never run through a graph.
     */
    default Optional<ShapePadding> padding() {
        return Optional.empty();
    }

    /** Frees the model's weights on its device. */
    @Override
    void close();
}
