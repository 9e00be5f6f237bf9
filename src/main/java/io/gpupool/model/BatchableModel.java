package io.gpupool.model;

import java.util.List;
import java.util.Optional;
import java.util.Set;
import java.util.function.LongUnaryOperator;

/**
 * A model that can run several requests' inputs as one forward (dynamic batching) and give each request
 * exactly the outputs it would get alone.
 *
 * <ol>
 *   <li>{@link #prepare} checks one request the way {@link #infer} would (names, shapes, token ids, output
 *       names) and converts its inputs; a request it rejects never joins a batch. It touches no device.</li>
 *   <li>{@link #batchPeakBytes} is the planned activation peak of running some prepared members together,
 *       from the model's liveness plan, so a batcher can split a batch before it starts.</li>
 *   <li>{@link #inferBatch} runs the members as one forward on one stream and slices the outputs back:
 *       element i holds member i's selected outputs, shaped as {@link #infer} would shape them.</li>
 * </ol>
 */
public interface BatchableModel extends InferenceModel {

    /** One validated request, ready to join a batch of this model. */
    interface Member {

        /** Batch rows (sequences, for an encoder) the request carries. */
        int rows();

        /** Tokens the request carries: rows × sequence length, or rows for models without a sequence axis. */
        int tokens();

        /** Longest sequence of the request (0 without a sequence axis). */
        int sequenceLength();
    }

    /**
     * Checks and converts one request; heap only, no device work.
     *
     * @throws IllegalArgumentException naming the problem, exactly when {@link #infer} would reject the request
     */
    Member prepare(List<HostTensor> inputs, Set<String> requestedOutputs);

    /** The planned activation peak, in bytes, of one forward over {@code members} (as {@link PlannedMemory}). */
    long batchPeakBytes(List<? extends Member> members);

    /** The same peak with each tensor rounded by {@code blockBytes}, as {@link PlannedMemory#peakActivationBytes(int, int, LongUnaryOperator)}. */
    default long batchPeakBytes(List<? extends Member> members, LongUnaryOperator blockBytes) {
        return batchPeakBytes(members);
    }

    /**
     * Whether {@code members} may run as one forward at all (e.g. a padded layout bounded by the model's largest
     * batch); a batcher stops adding members at the first that would break it. Reads only the members'
     * {@link Member#rows}, {@link Member#tokens} and {@link Member#sequenceLength}: a batcher also asks it about
     * requests not prepared yet, to let a request that no other could join run alone at once.
     */
    default boolean fitsOneForward(List<? extends Member> members) {
        return true;
    }

    /**
     * Runs members prepared by this model as one forward. Synchronises {@code context.stream()} before
     * returning; all device memory taken is released, on failure too.
     *
     * @return per member, its selected outputs (all outputs when it selected none), in {@link #outputs()} order
     */
    List<List<HostTensor>> inferBatch(List<? extends Member> members, ExecutionContext context);

    /**
     * How batched members share a forward on this replica: {@code "packed"} (rows or tokens concatenated, no
     * padding) or {@code "padded"} (sequences padded to the longest, masked), for metadata and the actuator.
     */
    String batchLayout();

    /**
     * How this model runs a batch padded to a larger packed shape, so that batches can replay CUDA graphs captured
     * per shape bucket; empty (the default) where its batches do not run packed.
     */
    default Optional<BatchPadding> batchPadding() {
        return Optional.empty();
    }

    /**
     * How this model runs a batch of the padded layout at a larger request shape, so that such a batch replays the
     * CUDA graph of a request of that shape; empty (the default) where its batches do not run padded. At most one of
     * this and {@link #batchPadding} is present; with neither, batches always run eagerly.
     */
    default Optional<PaddedBatchPadding> paddedBatchPadding() {
        return Optional.empty();
    }

    /** The model's {@code dynamic_batching} settings from its config.json (unset components: the server's). */
    ModelConfig.Batching batching();
}
