package io.gpupool.replay;

import io.gpupool.memory.AllocationStream;
import io.gpupool.memory.StreamFence;

/**
 * A replay stream whose device work lags the host: a fence recorded at trace event e completes at
 * event e + {@code lagEvents}, as on a busy GPU where the kernels that used a freed block are still
 * queued when the host frees it. Plain {@link ReplayStream}s complete at once, which hides what
 * pending fences cost an allocator (memory it may not unmap or hand to another stream yet).
 * Its fences are {@link SimulatedFence}s.
 */
final class LaggingReplayStream implements AllocationStream {

    private final int ordinal;
    private final long[] clock;
    private final long lagEvents;

    /**
     * @param clock     a one-element array holding the index of the event being replayed
     * @param lagEvents events after which a fence completes (&gt; 0)
     */
    LaggingReplayStream(int ordinal, long[] clock, long lagEvents) {
        if (ordinal < 0 || lagEvents <= 0) {
            throw new IllegalArgumentException("ordinal = " + ordinal + ", lagEvents = " + lagEvents
                    + " are invalid; allowed: ordinal >= 0, lagEvents > 0");
        }
        this.ordinal = ordinal;
        this.clock = clock;
        this.lagEvents = lagEvents;
    }

    @Override
    public int ordinal() {
        return ordinal;
    }

    @Override
    public StreamFence recordFence() {
        long readyAt = clock[0] + lagEvents;
        return new SimulatedFence(() -> clock[0] >= readyAt);
    }

    @Override
    public String toString() {
        return "replay stream " + ordinal + " (fences complete " + lagEvents + " events later)";
    }
}
