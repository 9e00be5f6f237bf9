package io.gpupool.memory;

import java.util.concurrent.atomic.AtomicLong;

/**
 * What a stream tells the pool about its host synchronisations ({@link AllocationStream#syncMark},
 * {@link AllocationStream#synchronizedSince}), so that memory freed on it before a synchronisation
 * needs no fence at all.
 *
 * <pre>
 *   begun:     1   2   3   ...   synchronisations numbered as they begin
 *   completed: the highest number whose synchronisation returned (Long.MAX_VALUE once closed)
 *   mark()     = begun now;  synchronizedSince(m) = completed &gt; m
 * </pre>
 * A synchronisation numbered above a mark began after the mark was read, so after the work queued
 * before it (the freeing user queued that work, then freed; the pool's maintenance frees only what
 * sat in the stream's cache, whose work was queued earlier still): when it returns, that work is done.
 * A synchronisation that was already running when the mark was taken does not count, even if it
 * returns later. Thread-safe: any thread may read a mark while the stream's user synchronises.
 */
public final class SyncMarks {

    private final AtomicLong begun = new AtomicLong();
    private final AtomicLong completed = new AtomicLong();

    /** The mark for memory leaving the stream now. */
    public long mark() {
        return begun.get();
    }

    /** Call before the stream waits; pass the result to {@link #returned} once the wait succeeded. */
    public long begin() {
        return begun.incrementAndGet();
    }

    /** The synchronisation {@code number} ({@link #begin}) returned: all work queued before it finished. */
    public void returned(long number) {
        completed.accumulateAndGet(number, Math::max);
    }

    /** The stream closed after finishing its work: every mark is passed. */
    public void closed() {
        completed.set(Long.MAX_VALUE);
    }

    /** Whether a synchronisation that began after {@code mark} returned, or the stream closed. */
    public boolean since(long mark) {
        return completed.get() > mark;
    }
}
