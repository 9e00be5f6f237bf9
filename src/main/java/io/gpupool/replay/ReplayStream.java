package io.gpupool.replay;

import io.gpupool.memory.AllocationStream;
import io.gpupool.memory.StreamFence;

/**
 * A stream with no device behind it, for replaying traces and for tests: its fences are complete
 * at once (there is no queued work to wait for).
 */
public record ReplayStream(int ordinal) implements AllocationStream {


    public ReplayStream {
        if (ordinal < 0) {
            throw new IllegalArgumentException("stream ordinal must be >= 0, got " + ordinal);
        }
    }

    @Override
    public StreamFence recordFence() {
        return StreamFence.completed();
    }

    /** Nothing is ever queued: every mark is passed (lazy fences clear at once). */
    @Override
    public boolean synchronizedSince(long mark) {
        return true;
    }
}
