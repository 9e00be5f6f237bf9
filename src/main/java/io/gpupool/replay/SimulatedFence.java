package io.gpupool.replay;

import io.gpupool.memory.AllocationStream;
import io.gpupool.memory.StreamFence;

import java.util.function.BooleanSupplier;

/**
 * A fence of a replayed stream that completes when {@code done} says so (a point in the trace, the
 * end of a request). There is no device: a wait has nothing to order and the host has nothing to
 * block on, since time is the trace.
 */
record SimulatedFence(BooleanSupplier done) implements StreamFence {

    @Override
    public boolean isComplete() {
        return done.getAsBoolean();
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
