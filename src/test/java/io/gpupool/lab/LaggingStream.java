package io.gpupool.lab;

import io.gpupool.memory.AllocationStream;
import io.gpupool.memory.StreamFence;

/**
 * The one stream of the single-stream pair benches ({@link PairCpuBench}, {@link MappedPairBench}): its fences
 * complete {@code lagNanos} after they were recorded, since a GPU's event is not complete the moment the free
 * records it (0: complete at once, {@link StreamFence#completed()}). It counts the fences it recorded and the
 * completion queries made on them, since on a GPU each is a driver call; the benches run on one thread, so the
 * counters are plain fields.
 */
final class LaggingStream implements AllocationStream {

    private final int ordinal;
    private final long lagNanos;
    /** Fences recorded so far. */
    long recorded;
    /** Completion queries made on this stream's lagging fences so far. */
    long queried;

    LaggingStream(int ordinal, long lagNanos) {
        this.ordinal = ordinal;
        this.lagNanos = lagNanos;
    }

    @Override
    public int ordinal() {
        return ordinal;
    }

    @Override
    public StreamFence recordFence() {
        recorded++;
        return lagNanos == 0 ? StreamFence.completed() : new TimedFence(System.nanoTime() + lagNanos);
    }

    /** A fence that completes at {@code dueNanos} ({@link System#nanoTime()}); counts its completion queries. */
    private final class TimedFence implements StreamFence {
        private final long dueNanos;

        TimedFence(long dueNanos) {
            this.dueNanos = dueNanos;
        }

        @Override
        public boolean isComplete() {
            queried++;
            return System.nanoTime() >= dueNanos;
        }

        @Override
        public void makeWait(AllocationStream waiter) {
        }

        @Override
        public void await() {
            while (!isComplete()) {
                Thread.onSpinWait();
            }
        }

        @Override
        public void close() {
        }
    }
}
