package io.gpupool.memory;

/** A point in one stream's queue; see {@link AllocationStream} for how the pool uses it. */
public interface StreamFence {

    /** True once all work queued before the fence has finished. Never blocks. */
    boolean isComplete();

    /** Makes {@code stream}'s later work wait until this fence completes (may return at once). */
    void makeWait(AllocationStream stream);

    /** Blocks the calling thread until the fence completes. */
    void await();

    /** Releases native resources held by the fence (a CUDA event); idempotent. */
    void close();
}
