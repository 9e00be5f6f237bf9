package io.gpupool.model;

import java.lang.foreign.Arena;
import java.util.List;

/**
 * How a model runs a request at a larger shape with the padding masked, so that one captured graph
 * serves every request that rounds up to its shape (see {@code model.graph.ShapeBuckets}). Outputs of
 * the real tokens and sequences of a padded run equal those of the unpadded run; {@link #trim} cuts
 * the padded outputs back to the request's shape.
 */
public interface ShapePadding {

    /** A request's batch and sequence length (sequence 0 for a model without a sequence axis). */
    record Shape(int batch, int sequence) {
    }

    /**
     * The shape of a request, or null when its inputs do not agree on one (or lack the input that
     * carries it): the model then reports the problem itself on an unpadded run.
     */
    Shape shapeOf(List<HostTensor> inputs);

    /** The inputs padded to {@code padded}, allocated in {@code arena}; padding is masked out. */
    List<HostTensor> pad(List<HostTensor> inputs, Shape padded, Arena arena);

    /** The outputs of a padded run at the request's own {@code shape}, in fresh memory. */
    List<HostTensor> trim(List<HostTensor> outputs, Shape shape);
}
