package io.gpupool.model.graph;

import io.gpupool.model.ExecutionContext;

/**
 * One forward at a graph's padded shape, the same host code run with whatever context it is given: a dry run, the
 * warm-up, the capture ({@link ForwardCapture}) and every replay ({@link GraphedModel}). A request's forward is the
 * model's {@code infer} of its padded inputs; a packed batch's its {@code BatchPadding.inferPadded} at the bucket.
 *
 * @param <T> what the forward returns (its outputs; captures drop them)
 */
@FunctionalInterface
interface PaddedForward<T> {

    T run(ExecutionContext context);
}
