package io.gpupool.memory.pool;

import io.gpupool.memory.AllocationStream;
import io.gpupool.memory.StreamFence;
import io.gpupool.memory.SyncMarks;

import java.util.HashMap;
import java.util.Map;

/**
 * A stream modelled as a queue of numbered work items: {@link #enqueue} queues one, {@link #progress}
 * lets the "device" finish them, {@link #synchronize} finishes all of them on the host's behalf (and
 * tells the pool through {@link SyncMarks}). A fence is the number of the last item queued when it was
 * recorded; a wait makes the waiting stream's later work run after that item, which the model keeps
 * as the highest item of each other stream it waits for. Single-threaded tests only.
 */
final class ModelStream implements AllocationStream {

    private final int ordinal;
    private final SyncMarks syncs = new SyncMarks();
    private final Map<ModelStream, Long> waitsFor = new HashMap<>();
    private long queued;
    private long done;
    /** Fences recorded, and those closed, so far. */
    int recorded;
    int closed;

    ModelStream(int ordinal) {
        this.ordinal = ordinal;
    }

    @Override
    public int ordinal() {
        return ordinal;
    }

    /** Queues one item of work (say, a kernel using a block); returns its number. */
    long enqueue() {
        return ++queued;
    }

    /** The device finished the items up to {@code item} (at most those queued). */
    void progress(long item) {
        done = Math.max(done, Math.min(item, queued));
    }

    /** The host waits until all queued work finished. */
    void synchronize() {
        long sync = syncs.begin();
        done = queued;
        syncs.returned(sync);
    }

    long queued() {
        return queued;
    }

    /**
     * Whether {@code user}'s work queued from now on runs after item {@code item} of this stream: it
     * finished already, or {@code user} is this stream, or {@code user} was made to wait for it.
     */
    boolean orderedAfter(long item, ModelStream user) {
        return done >= item || user == this || user.waitsFor.getOrDefault(this, 0L) >= item;
    }

    @Override
    public StreamFence recordFence() {
        recorded++;
        return new Fence(queued);
    }

    @Override
    public long syncMark() {
        return syncs.mark();
    }

    @Override
    public boolean synchronizedSince(long mark) {
        return syncs.since(mark);
    }

    private final class Fence implements StreamFence {
        private final long item;
        private boolean isClosed;

        Fence(long item) {
            this.item = item;
        }

        @Override
        public boolean isComplete() {
            check();
            return done >= item;
        }

        @Override
        public void makeWait(AllocationStream stream) {
            check();
            ((ModelStream) stream).waitsFor.merge(ModelStream.this, item, Math::max);
        }

        @Override
        public void await() {
            check();
            progress(item);
        }

        @Override
        public void close() {
            if (isClosed) {
                throw new AssertionError("a fence of stream " + ordinal + " closed twice");
            }
            isClosed = true;
            closed++;
        }

        private void check() {
            if (isClosed) {
                throw new AssertionError("a closed fence of stream " + ordinal + " was used");
            }
        }
    }
}
