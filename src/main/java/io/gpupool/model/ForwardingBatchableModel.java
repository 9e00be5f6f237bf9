package io.gpupool.model;

import java.util.List;
import java.util.Optional;
import java.util.Set;
import java.util.function.LongUnaryOperator;

/**
 * A model wrapper that batches exactly as the model it wraps: every batching call goes to {@link #batchable()}.
 * Wrappers that change how a single request runs (graphs, text inputs) implement it so that putting a model
 * behind them does not turn its batching off; one that must change a batching step overrides that method.
 */
public interface ForwardingBatchableModel extends BatchableModel {

    /** The wrapped model that does the batching. */
    BatchableModel batchable();

    @Override
    default Member prepare(List<HostTensor> inputs, Set<String> requestedOutputs) {
        return batchable().prepare(inputs, requestedOutputs);
    }

    @Override
    default long batchPeakBytes(List<? extends Member> members) {
        return batchable().batchPeakBytes(members);
    }

    @Override
    default long batchPeakBytes(List<? extends Member> members, LongUnaryOperator blockBytes) {
        return batchable().batchPeakBytes(members, blockBytes);
    }

    @Override
    default boolean fitsOneForward(List<? extends Member> members) {
        return batchable().fitsOneForward(members);
    }

    @Override
    default List<List<HostTensor>> inferBatch(List<? extends Member> members, ExecutionContext context) {
        return batchable().inferBatch(members, context);
    }

    @Override
    default String batchLayout() {
        return batchable().batchLayout();
    }

    @Override
    default Optional<BatchPadding> batchPadding() {
        return batchable().batchPadding();
    }

    @Override
    default Optional<PaddedBatchPadding> paddedBatchPadding() {
        return batchable().paddedBatchPadding();
    }

    @Override
    default ModelConfig.Batching batching() {
        return batchable().batching();
    }
}
