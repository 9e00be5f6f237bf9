package io.gpupool.memory.pool;

import io.gpupool.memory.AllocationStream;

import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReferenceArray;

/**
 * The lazy fences of the global level's frees, shared: a free on a stream takes the stream's latest
 * {@link LazyFence} instead of a new one while that fence can still stand for it, so a stream that
 * frees and frees again between two synchronisations creates, counts and closes one fence object, not
 * one per free.
 *
 * <h2>When a fence can stand for a later free</h2>
 * A lazy fence F of stream S, taken at mark m, promises: complete once S synchronised after m, or once
 * the event recorded on demand (later than the free) completed. A later free on S, whose work S queued
 * before it, is covered by F exactly when
 * <ol>
 *   <li>it is the same stream object (an ordinal names a slot; a new stream object may reuse it);</li>
 *   <li>S's mark is still m: a synchronisation numbered above m began after this free read the mark, so
 *       after its work was queued; once the mark moved, F may already be complete for work it never saw;</li>
 *   <li>F records no event yet ({@link LazyFence#coversFreeAt}): the recording side seals F before it
 *       records, the reusing side retains F before it reads the seal, so a reuse that sees F unsealed
 *       precedes the record, which then follows this free's work as well;</li>
 *   <li>F is still open: {@link FenceSet.Shared#tryRetain} never revives a fence whose last reference
 *       went (the slot holds none, so an unused fence closes as before and {@link GlobalLevel#openFences}
 *       still reaches 0).</li>
 * </ol>
 * Otherwise the free gets a new fence, which becomes the slot's. Sets that meet the shared fence again
 * keep one reference to it ({@link FenceSet} replaces a stream's fence only by a newer one).
 *
 * <pre>
 *   slot[S] -&gt; F(m)          free 1, free 2, free 3 on S   all under F, one object
 *   S synchronises           mark m+1: the next free gets F'(m+1), slot[S] -&gt; F'
 *   T takes memory under F'  F' sealed, event recorded; the next free on S gets F''
 * </pre>
 * Lock-free: a slot is read with acquire semantics and replaced only by a compare-and-set against the fence
 * the free read. So a slot's sequence numbers only grow, and a free that starts after another free got its
 * fence never gets an older fence of that stream. That matters because {@link FenceSet} keeps the newer of two
 * fences of a stream: were an older, unsealed fence installed over a newer one that gets sealed, a stream taking
 * back a unit that still holds the newer fence ({@link Chunk#takeFences(long, long, FenceSet, int)}) and freeing
 * it again under the older would leave the unit behind an event recorded before its latest work. Two frees
 * racing on one slot at worst create a fence each; the loser closes its own unused and takes the winner's.
 *
 * <h2>Idle streams</h2>
 * A fence that left its slot completes by itself: a newer mark means a synchronisation began after it,
 * a seal means its event was recorded. Only a slot's own fence can wait for ever, on a stream that frees
 * and then goes idle (a model unloaded, a failed request drained and freed): no synchronisation and no
 * taker ever completes it, and a reclaim that does not wait skips its memory. {@link #recordUnfinished}
 * (the pool's maintenance) records those fences, so an idle stream's memory counts as finished at the
 * next look, and a busy stream's gets one event per maintenance round.
 */
final class LatestLazyFences {

    /** Streams with a higher ordinal get a fence per free. */
    private static final int SLOTS = 256;

    private final AtomicReferenceArray<FenceSet.Shared> latest = new AtomicReferenceArray<>(SLOTS);
    private final AtomicLong open;

    /** @param open counts the fences created here until they close */
    LatestLazyFences(AtomicLong open) {
        this.open = open;
    }

    /** A lazy fence for memory leaving {@code stream} now, taken at {@code mark}, with one reference for the caller. */
    FenceSet.Shared fenceFor(AllocationStream stream, long mark) {
        int ordinal = stream.ordinal();
        if (ordinal < 0 || ordinal >= SLOTS) {
            return new FenceSet.Shared(new LazyFence(stream, mark), ordinal, open);
        }
        while (true) {
            FenceSet.Shared current = latest.getAcquire(ordinal);
            if (current != null && current.tryRetain()) {
                if (((LazyFence) current.fence).coversFreeAt(stream, mark)) {
                    return current;
                }
                current.release();
            }
            FenceSet.Shared fresh = new FenceSet.Shared(new LazyFence(stream, mark), ordinal, open);
            if (latest.compareAndSet(ordinal, current, fresh)) {
                return fresh;
            }
            fresh.release();                                       // another free installed one: try that
        }
    }

    /** Records the event of every slot's fence still open and unfinished ("Idle streams"). */
    void recordUnfinished() {
        for (int i = 0; i < SLOTS; i++) {
            FenceSet.Shared current = latest.getAcquire(i);
            if (current != null && current.tryRetain()) {
                try {
                    if (!current.isComplete()) {
                        ((LazyFence) current.fence).recordNow();
                    }
                } finally {
                    current.release();
                }
            }
        }
    }
}
