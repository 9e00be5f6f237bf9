package io.gpupool.model;

import io.gpupool.model.BatchableModel.Member;
import io.gpupool.model.ShapePadding.Shape;

import java.util.List;

/**
 * How a batchable model of the padded layout runs a batch at a larger request shape with the padding masked, so
 * that a batch replays the CUDA graph a single request of that shape replays (see {@code model.graph.ShapeBuckets}):
 * the padded-layout form of {@link BatchPadding}. A padded batch is one forward of [R, S*], its members' R = Σ rows
 * sequences each padded to the longest S* and masked; that is the forward of one request of batch R and sequence S*,
 * so it pads as a request does ({@link ShapePadding}: extra columns masked, extra rows with one unmasked token),
 * and each member gets exactly what {@link BatchableModel#inferBatch} would give it.
 */
public interface PaddedBatchPadding {

    /**
     * The request shape of {@code members} run as one forward: (Σ rows, longest sequence); null when padding it
     * could change a member's outputs (as {@link ShapePadding#shapeOf} says null for a request), and then the batch
     * runs eagerly.
     */
    Shape shapeOf(List<? extends Member> members);

    /** Whether a batch may run as one forward of {@code padded} (the model's bound on a batch's cells). */
    boolean fits(Shape padded);

    /**
     * The inputs the padded forward of {@code members} takes, by name, sorted: the names a request's padded inputs
     * have ({@link ShapePadding#pad} always adds the mask), so that a batch and a request of one shape share a key.
     */
    List<String> inputs(List<? extends Member> members);

    /** The outputs the forward of {@code members} computes and downloads: the union of their selections, sorted. */
    List<String> outputs(List<? extends Member> members);

    /**
     * Runs {@code members} as one forward at {@code padded} (at least their own {@link #shapeOf shape} in both
     * numbers, and {@link #fits}): the device work of a request padded to {@code padded} with these {@link #inputs}
     * and {@link #outputs}, whatever the members' own lengths.
     *
     * @return per member, what {@link BatchableModel#inferBatch} returns for it
     */
    List<List<HostTensor>> inferPadded(List<? extends Member> members, Shape padded, ExecutionContext context);
}
