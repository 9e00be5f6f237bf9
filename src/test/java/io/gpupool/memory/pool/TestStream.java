package io.gpupool.memory.pool;

import io.gpupool.memory.AllocationStream;
import io.gpupool.memory.StreamFence;

import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * A test {@link AllocationStream}: its fences complete at once unless {@link #pending} is set, and
 * every fence remembers which streams were made to wait on it.
 */
final class TestStream implements AllocationStream {

    static final AtomicInteger OPEN_FENCES = new AtomicInteger();

    final int ordinal;
    volatile boolean pending;
    final List<TestFence> fences = new CopyOnWriteArrayList<>();

    TestStream(int ordinal) {
        this.ordinal = ordinal;
    }

    @Override
    public int ordinal() {
        return ordinal;
    }

    @Override
    public StreamFence recordFence() {
        TestFence fence = new TestFence(this, !pending);
        fences.add(fence);
        return fence;
    }

    static final class TestFence implements StreamFence {
        final TestStream stream;
        volatile boolean complete;
        volatile boolean closed;
        volatile boolean awaited;
        final List<AllocationStream> waiters = new CopyOnWriteArrayList<>();

        TestFence(TestStream stream, boolean complete) {
            this.stream = stream;
            this.complete = complete;
            OPEN_FENCES.incrementAndGet();
        }

        @Override
        public boolean isComplete() {
            return complete;
        }

        @Override
        public void makeWait(AllocationStream waiter) {
            if (closed) {
                throw new AssertionError("makeWait on a closed fence");
            }
            waiters.add(waiter);
        }

        @Override
        public void await() {
            if (closed) {
                throw new AssertionError("await on a closed fence");
            }
            awaited = true;
            complete = true;
        }

        @Override
        public void close() {
            if (!closed) {
                closed = true;
                OPEN_FENCES.decrementAndGet();
            }
        }
    }
}
