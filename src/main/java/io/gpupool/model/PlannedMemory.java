package io.gpupool.model;

/**
 * A model whose per-request device memory is known in advance from its execution plan (see
 * {@code model.plan.ExecutionPlan}), so a server can size its pool before the first
 * request. Byte counts are rounded per tensor to the allocators' 256-byte granule; a pool with
 * coarser size classes should round each tensor to its own classes on top.
 */
public interface PlannedMemory {

    /** Most bytes one request of {@code batch} × {@code seq} holds at once (seq ignored without a sequence dimension). */
    long peakActivationBytes(int batch, int seq);

    /** The largest single allocation such a request makes. */
    long largestActivationBytes(int batch, int seq);
}
