package io.gpupool.model;

import java.util.function.LongUnaryOperator;

/**
 * A model whose per-request device memory is known in advance from its execution plan (see
 * {@code model.plan.ExecutionPlan}), so a server can size its pool before the first
 * request. Byte counts are rounded per tensor to the allocators' 256-byte granule; a pool with
 * coarser size classes should round each tensor to its own classes on top.
 */
public interface PlannedMemory {

    /** Most bytes one request of {@code batch} × {@code seq} holds at once (seq ignored without a sequence dimension). */
    long peakActivationBytes(int batch, int seq);

    /**
     * The same peak as an allocator with coarser blocks holds it: each tensor rounded by {@code blockBytes}
     * (bytes asked -&gt; bytes handed out). Models without per-tensor plans answer the plain peak.
     */
    default long peakActivationBytes(int batch, int seq, LongUnaryOperator blockBytes) {
        return peakActivationBytes(batch, seq);
    }

    /** The largest single allocation such a request makes. */
    long largestActivationBytes(int batch, int seq);
}
