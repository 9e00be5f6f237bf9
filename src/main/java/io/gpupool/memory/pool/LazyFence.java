package io.gpupool.memory.pool;

import io.gpupool.memory.AllocationStream;
import io.gpupool.memory.StreamFence;

/**
 * A fence for memory freed into the global level that records nothing until another stream needs it
 * ({@code lazyFences}): a free then costs no driver call, and most frees never need one.
 *
 * <pre>
 *   free on S          mark m = S.syncMark(), no event
 *     |
 *     +-- S takes it back        nothing: S's later work runs after its earlier work (FenceSet
 *     |                          skips a stream's own fences without asking them)
 *     +-- S synchronises         S.synchronizedSince(m): complete, no event ever recorded
 *     +-- T takes it first       record S's fence now, T waits on it (device-side)
 *     +-- trim / unmap / close   record S's fence now, the host awaits it
 * </pre>
 *
 * <ol>
 *   <li>{@link #isComplete}: true once S synchronised after the mark (latched), or once a fence recorded
 *       on demand completed; never records, so asking it (placement asks every candidate) stays cheap,
 *       and memory under a fence nobody needed counts as pending until S synchronises.</li>
 *   <li>{@link #makeWait} / {@link #await}: unless complete, record one fence on S (at most once; under this
 *       object's monitor) and wait on it. Recorded later than the free, it follows everything S had queued
 *       by then, which includes all work on the memory: later than needed, never too early. Recording on S
 *       from another thread is safe: enqueueing an event on a stream is legal from any thread on CUDA, and a
 *       host stream's fence is the ticket of its last queued task, read atomically.</li>
 *   <li>{@link #close}: closes the recorded fence, if one was.</li>
 * </ol>
 * Two lazy fences of one stream keep FenceSet's rule that a later fence implies the earlier: the later
 * one's mark is no lower and its on-demand record no earlier.
 */
final class LazyFence implements StreamFence {

    private final AllocationStream stream;
    private final long mark;
    /** The fence recorded on demand; written under this object's monitor, read without it. */
    private volatile StreamFence recorded;
    /** Latched once S synchronised after the mark. */
    private volatile boolean synced;
    /** Set before the on-demand record: from then on this fence cannot stand for a later free (LatestLazyFences). */
    private volatile boolean sealed;
    private boolean closed;

    /** @param mark {@code stream}'s {@link AllocationStream#syncMark()}, taken at the free */
    LazyFence(AllocationStream stream, long mark) {
        this.stream = stream;
        this.mark = mark;
    }

    @Override
    public boolean isComplete() {
        if (synchronizedSince()) {
            return true;
        }
        StreamFence fence = recorded;
        return fence != null && fence.isComplete();
    }

    @Override
    public void makeWait(AllocationStream waiter) {
        if (waiter.ordinal() != stream.ordinal() && !synchronizedSince()) {
            record().makeWait(waiter);
        }
    }

    @Override
    public void await() {
        if (!synchronizedSince()) {
            record().await();
        }
    }

    @Override
    public synchronized void close() {
        closed = true;
        StreamFence fence = recorded;
        if (fence != null) {
            fence.close();
        }
    }

    /**
     * Whether this fence also stands for memory that {@code freeing} frees now, at mark {@code markNow}: same
     * stream object, same mark, nothing recorded yet. The caller holds a reference, taken before this read of
     * the seal (see {@link LatestLazyFences} for why that order makes it safe).
     */
    boolean coversFreeAt(AllocationStream freeing, long markNow) {
        return freeing == stream && markNow == mark && !sealed;
    }

    /** Records the fence now unless it completed (maintenance: see {@link LatestLazyFences}, "Idle streams"). */
    void recordNow() {
        if (!synchronizedSince()) {
            record();
        }
    }

    /** Whether a fence was recorded on demand (tests and benchmarks count them). */
    boolean wasRecorded() {
        return recorded != null;
    }

    private boolean synchronizedSince() {
        if (synced) {
            return true;
        }
        if (stream.synchronizedSince(mark)) {
            synced = true;
            return true;
        }
        return false;
    }

    private synchronized StreamFence record() {
        if (closed) {
            throw new IllegalStateException("lazy fence of stream " + stream.ordinal() + " is closed");
        }
        StreamFence fence = recorded;
        if (fence == null) {
            sealed = true;                                         // before the record: see coversFreeAt
            fence = stream.recordFence();
            recorded = fence;
        }
        return fence;
    }
}
