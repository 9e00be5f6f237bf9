package io.gpupool.memory.trace;

import io.gpupool.memory.AllocationStream;
import io.gpupool.memory.StreamFence;

/**
 * A stream with no device behind it, for replaying traces and for tests: its fences are complete
 * at once (there is no queued work to wait for).
 */
public record ReplayStream(int ordinal) implements AllocationStream {

    private static final StreamFence COMPLETE = new StreamFence() {
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
    };

    public ReplayStream {
        if (ordinal < 0) {
            throw new IllegalArgumentException("stream ordinal must be >= 0, got " + ordinal);
        }
    }

    @Override
    public StreamFence recordFence() {
        return COMPLETE;
    }
}
