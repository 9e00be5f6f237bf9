package io.gpupool.memory;

/** A point in one stream's queue; see {@link AllocationStream} for how the pool uses it. */
public interface StreamFence {

    /**
     * A fence with nothing to wait for: for streams without queued work (trace replay, host
     * staging) and for streams already closed, whose work all finished when they closed.
     */
    static StreamFence completed() {
        return CompletedFence.INSTANCE;
    }

    /** True once all work queued before the fence has finished. Never blocks. */
    boolean isComplete();

    /** Makes {@code stream}'s later work wait until this fence completes (may return at once). */
    void makeWait(AllocationStream stream);

    /** Blocks the calling thread until the fence completes. */
    void await();

    /** Releases native resources held by the fence (a CUDA event); idempotent. */
    void close();
}

/** The shared instance behind {@link StreamFence#completed()}. */
enum CompletedFence implements StreamFence {
    INSTANCE;

    @Override
    public boolean isComplete() {
        return true;
    }

    @Override
    public void makeWait(AllocationStream stream) {
    }

    @Override
    public void await() {
    }

    @Override
    public void close() {
    }
}
