package io.gpupool.memory.pool;

import io.gpupool.memory.AllocationStream;
import io.gpupool.memory.StreamFence;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.Arrays;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The fences protecting one unit of a chunk ({@link Chunk}) or one slab: at most one per stream, the
 * latest recorded when this memory left that stream for the global level (a later fence on a stream
 * implies the earlier).
 *
 * <p>A fence recorded for a batch of frees is shared by every set the batch touched, so fences are
 * wrapped in a reference-counted {@link Shared}; the underlying {@link StreamFence} is closed when
 * the last set drops it. All methods hold the set's lock: its own monitor, or for the unit sets of a
 * chunk the chunk's one fence lock, so that an operation on a run's units takes one lock for all of
 * them (a monitor per unit was most of the cost of a 64 MiB pair under pending fences). They run on
 * the global path only and {@link #isEmpty()} lets callers skip the lock when there is nothing to
 * wait for. Lock order: a chunk's fence lock, then a set with a monitor of its own (a slab's, or a
 * run's gathering set); never the other way round.
 */
final class FenceSet {

    /** A fence shared by several sets; closed when the last one lets go. */
    static final class Shared {
        private static final AtomicLong SEQUENCE = new AtomicLong();
        private static final VarHandle REFERENCES;

        static {
            try {
                REFERENCES = MethodHandles.lookup().findVarHandle(Shared.class, "references", int.class);
            } catch (ReflectiveOperationException e) {
                throw new ExceptionInInitializerError(e);
            }
        }

        final StreamFence fence;
        final int ordinal;
        final long sequence;
        /**
         * References held by sets and by the freeing batch: a field rather than an AtomicInteger (one
         * object per fence), set to 1 with a plain store (the fence reaches other threads only through
         * the locks of the sets it joins).
         */
        @SuppressWarnings("unused") // accessed through REFERENCES
        private volatile int references;
        /** Latched once the fence was seen complete: the many unit sets sharing it ask the driver once. */
        private volatile boolean complete;

        /** Fences of the pool not yet closed, or null when nobody counts them. */
        private final AtomicLong open;

        Shared(StreamFence fence, int ordinal) {
            this(fence, ordinal, null);
        }

        /** @param open incremented now and decremented when the fence closes (null: not counted) */
        Shared(StreamFence fence, int ordinal, AtomicLong open) {
            this.fence = fence;
            this.ordinal = ordinal;
            this.sequence = SEQUENCE.incrementAndGet();
            REFERENCES.set(this, 1);
            this.open = open;
            if (open != null) {
                open.incrementAndGet();
            }
        }

        boolean isComplete() {
            if (!complete && fence.isComplete()) {
                complete = true;
            }
            return complete;
        }

        Shared retain() {
            REFERENCES.getAndAdd(this, 1);
            return this;
        }

        /** Adds a reference unless the last one already went (the fence closed); for {@link LatestLazyFences}. */
        boolean tryRetain() {
            int references;
            do {
                references = (int) REFERENCES.getVolatile(this);
                if (references <= 0) {
                    return false;
                }
            } while (!REFERENCES.compareAndSet(this, references, references + 1));
            return true;
        }

        /** Adds {@code count} references at once (one atomic for the units of a run, {@link #addRetainedLocked}). */
        void retain(int count) {
            REFERENCES.getAndAdd(this, count);
        }

        void release() {
            release(1);
        }

        /** Drops {@code count} references at once; the last one closes the fence. */
        void release(int count) {
            if ((int) REFERENCES.getAndAdd(this, -count) == count) {
                fence.close();
                if (open != null) {
                    open.decrementAndGet();
                }
            }
        }
    }

    private static final Shared[] NONE = new Shared[0];
    private static final VarHandle EMPTY;

    static {
        try {
            EMPTY = MethodHandles.lookup().findVarHandle(FenceSet.class, "empty", boolean.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    /** What the methods synchronise on: this set, or the fence lock of the chunk whose unit it is. */
    private final Object lock;
    private Shared[] byStream = NONE;
    /**
     * No fence held. Written under the lock with release semantics, read without it with acquire
     * semantics: every decision that must not miss a fence is made by the holder of the memory, which
     * got it through the order lock or class lock that the adding thread released after adding (so it
     * sees the flag); everyone else reads it as a hint. No full fence per change, which a volatile
     * store would cost on every unit of every run freed under a pending fence.
     */
    private boolean empty = true;
    /**
     * The only fence of this set, or null when it holds none or several; written under the lock
     * (before {@link #empty}), read without it as a hint. Lets a {@link Scan} that already saw this
     * very fence unfinished answer for this set without the lock and without asking the driver.
     */
    private Shared sole;

    /**
     * What one scan over the units of a run learnt: a fence it saw unfinished (under the lock). One
     * fence is shared by every unit a batch of frees touched, so the next units whose only fence is
     * that one give the same answer at once: a run of n units costs one driver query, not n. The
     * remembered fence is compared by identity only, never asked again. One scan per range check, on
     * one thread.
     */
    static final class Scan {
        private Shared pending;
    }

    /** A set with a monitor of its own (a slab's, a run's gathering set). */
    FenceSet() {
        this.lock = this;
    }

    /** A set guarded by {@code lock}, shared with other sets (the units of one chunk). */
    FenceSet(Object lock) {
        this.lock = lock;
    }

    boolean isEmpty() {
        return (boolean) EMPTY.getAcquire(this);
    }

    /**
     * Read without the lock, as a hint: whether this set's only fence is stream {@code ordinal}'s (finished or
     * not). Memory a stream freed itself and that carries nothing else it can take back with no wait, so
     * {@link OwnFreedFirst} needs no more than this to prefer it; whoever takes the memory still sorts its
     * fences under the lock.
     */
    boolean onlyOwnHint(int ordinal) {
        Shared only = sole;
        return only != null && only.ordinal == ordinal && !isEmpty();
    }

    /**
     * Adds a reference to {@code fence}, replacing an older fence of the same stream; nothing when the set holds
     * this very fence already (a slab its stream keeps freeing into under one lazy fence: no reference taken only
     * to be dropped again).
     */
    void add(Shared fence) {
        synchronized (lock) {
            if (holdsLocked(fence)) {
                return;
            }
            fence.retain();
            addRetainedLocked(fence);
        }
    }

    /**
     * Like {@link #add}, with the reference already taken by the caller ({@link Shared#retain(int)}), who holds this
     * set's lock (a chunk's loop over a run's units).
     */
    void addRetainedLocked(Shared fence) {
        boolean wasEmpty = isEmpty();
        put(fence);
        if (wasEmpty) {
            holdOnly(fence);                                       // the usual case: no scan of the array
        } else {
            refresh();
        }
    }

    /** The set now holds exactly {@code fence} (null: nothing); what {@link #refresh} would find. Under the lock. */
    private void holdOnly(Shared fence) {
        sole = fence;
        EMPTY.setRelease(this, fence == null);
    }

    /** Recomputes {@link #empty} and {@link #sole} from the fences held; under the lock. */
    private void refresh() {
        Shared only = null;
        int held = 0;
        for (Shared shared : byStream) {
            if (shared != null) {
                only = shared;
                held++;
            }
        }
        sole = held == 1 ? only : null;
        if (empty != (held == 0)) {
            EMPTY.setRelease(this, held == 0);                     // a store only when it changes
        }
    }

    private void put(Shared fence) {
        if (fence.ordinal >= byStream.length) {
            byStream = Arrays.copyOf(byStream, Math.max(fence.ordinal + 1, byStream.length * 2));
        }
        Shared old = byStream[fence.ordinal];
        if (old == null || old.sequence < fence.sequence) {
            byStream[fence.ordinal] = fence;
            if (old != null) {
                old.release();
            }
        } else {
            fence.release();
        }
    }

    /**
     * Whether taking memory from this set's chunk or slab would make {@code stream} wait on another
     * stream's unfinished work; drops completed fences on the way. The answer is a hint for choosing
     * between candidates: whoever takes the memory still calls {@link #makeWait}.
     */
    boolean blocks(AllocationStream stream) {
        return blocks(stream, null);
    }

    /** {@link #blocks(AllocationStream)}, sharing what {@code scan} (may be null) saw on earlier units. */
    boolean blocks(AllocationStream stream, Scan scan) {
        if (isEmpty()) {
            return false;
        }
        Shared only = sole;
        if (scan != null && only != null && only == scan.pending) {
            return only.ordinal != stream.ordinal();               // seen unfinished in this scan
        }
        return dropCompleted(stream.ordinal(), scan) == FOREIGN;
    }

    /**
     * Whether this memory's pending fences all belong to {@code stream} (at least one, none of another
     * stream): memory the stream itself freed while its work on it may still run, which it can take
     * back with no wait (stream order) and nobody else can take without one. Drops completed fences.
     */
    boolean heldOnlyBy(AllocationStream stream, Scan scan) {
        if (isEmpty()) {
            return false;
        }
        Shared only = sole;
        if (scan != null && only != null && only == scan.pending) {
            return only.ordinal == stream.ordinal();               // seen unfinished in this scan
        }
        return dropCompleted(stream.ordinal(), scan) == OWN_ONLY;
    }

    private static final int NONE_PENDING = 0;
    private static final int OWN_ONLY = 1;
    private static final int FOREIGN = 2;

    /**
     * Drops completed fences; says whether unfinished ones remain, and whether any belongs to a stream
     * other than {@code ordinal} (-1: every stream counts as other). A fence {@code scan} (may be
     * null) saw unfinished counts as unfinished; the first one found unfinished here is remembered in it.
     */
    private int dropCompleted(int ordinal, Scan scan) {
        synchronized (lock) {
            return dropCompletedLocked(ordinal, scan);
        }
    }

    private int dropCompletedLocked(int ordinal, Scan scan) {
        boolean any = false;
        boolean foreign = false;
        for (int i = 0; i < byStream.length; i++) {
            Shared shared = byStream[i];
            if (shared == null) {
                continue;
            }
            if ((scan == null || shared != scan.pending) && shared.isComplete()) {
                byStream[i] = null;
                shared.release();
            } else {
                any = true;
                foreign |= i != ordinal;
                if (scan != null && scan.pending == null) {
                    scan.pending = shared;
                }
            }
        }
        refresh();
        return foreign ? FOREIGN : any ? OWN_ONLY : NONE_PENDING;
    }

    /**
     * Makes {@code stream} wait for every other stream's pending fence; drops completed ones. The
     * stream's own fence needs no wait (its work is ordered), finished or not, so a set that holds
     * only the stream's own fence answers without asking the driver (the common case when a stream
     * takes back what it freed); a finished one it keeps is dropped by the next look that asks.
     *
     * @return how many device-side waits were inserted (one per other stream with a pending fence)
     */
    int makeWait(AllocationStream stream) {
        if (isEmpty()) {
            return 0;
        }
        synchronized (lock) {
            int ordinal = stream.ordinal();
            if (!holdsOtherThan(ordinal) || dropCompletedLocked(ordinal, null) != FOREIGN) {
                return 0;
            }
            int waits = 0;
            for (int i = 0; i < byStream.length; i++) {
                Shared shared = byStream[i];
                if (shared != null && i != stream.ordinal()) {
                    shared.fence.makeWait(stream);
                    waits++;
                }
            }
            return waits;
        }
    }

    /** Whether a fence of a stream other than {@code ordinal} is held, finished or not; under the lock. */
    private boolean holdsOtherThan(int ordinal) {
        for (int i = 0; i < byStream.length; i++) {
            if (byStream[i] != null && i != ordinal) {
                return true;
            }
        }
        return false;
    }

    /** Whether any fence is still unfinished; drops the completed ones. */
    boolean pending(Scan scan) {
        if (isEmpty()) {
            return false;
        }
        Shared only = sole;
        return (scan != null && only != null && only == scan.pending) || dropCompleted(-1, scan) != NONE_PENDING;
    }

    /**
     * Blocks until every fence held now completed, then drops them (before the memory goes back to the
     * source). The wait happens outside the lock, which may be a whole chunk's: the fences are taken
     * with a reference under it and dropped under it afterwards, unless a newer fence replaced one.
     */
    void awaitAll() {
        Shared[] held;
        synchronized (lock) {
            if (isEmpty()) {
                return;
            }
            held = byStream.clone();
            for (Shared shared : held) {
                if (shared != null) {
                    shared.retain();
                }
            }
        }
        for (Shared shared : held) {
            if (shared != null) {
                shared.fence.await();
            }
        }
        synchronized (lock) {
            for (int i = 0; i < held.length; i++) {
                Shared shared = held[i];
                if (shared == null) {
                    continue;
                }
                if (i < byStream.length && byStream[i] == shared) {
                    byStream[i] = null;
                    shared.release();
                }
                shared.release();                                  // the reference taken for the wait
            }
            refresh();
        }
    }

    /** Drops every fence without waiting (the memory's new owner has been made to wait for them). */
    void clear() {
        synchronized (lock) {
            for (int i = 0; i < byStream.length; i++) {
                Shared shared = byStream[i];
                if (shared != null) {
                    byStream[i] = null;
                    shared.release();
                }
            }
            refresh();
        }
    }

    /** Adds a reference to each of {@code other}'s fences (a slab's run going back to its units). */
    void copyFrom(FenceSet other) {
        if (other.isEmpty()) {
            return;
        }
        Shared[] taken;
        synchronized (other.lock) {
            taken = other.byStream.clone();
            for (Shared shared : taken) {
                if (shared != null) {
                    shared.retain();
                }
            }
        }
        synchronized (lock) {
            for (Shared shared : taken) {
                if (shared != null) {
                    put(shared);
                }
            }
            refresh();
        }
    }

    /** Whether this set's only fence is stream {@code ordinal}'s. Under the lock. */
    boolean holdsOnlyLocked(int ordinal) {
        Shared only = sole;
        return only != null && only.ordinal == ordinal;
    }

    /** Whether this set holds {@code fence} itself (not only a fence of its stream). Under the lock. */
    boolean holdsLocked(Shared fence) {
        return fence.ordinal < byStream.length && byStream[fence.ordinal] == fence;
    }

    /**
     * Like {@link #absorb}, into a set only the calling thread can reach (the fences of a run it
     * took): when {@code unit}'s only fence is this set's only fence already (the units of a run
     * freed in one batch share it), the unit lets go of it and the caller owes that fence one
     * {@link Shared#release} (this set holds its own reference, so the caller may drop them together).
     *
     * @return the fence whose reference the caller now holds for the unit, or null (moved here)
     */
    Shared gather(FenceSet unit) {
        synchronized (unit.lock) {
            return gatherLocked(unit);
        }
    }

    /** {@link #gather} for a caller that holds {@code unit}'s lock (a chunk's loop over a run's units). */
    Shared gatherLocked(FenceSet unit) {
        Shared only = unit.sole;
        if (only != null && only == sole) {
            unit.byStream[only.ordinal] = null;
            unit.holdOnly(null);                                   // it held only that one
            return only;
        }
        absorb(unit);                                              // re-enters the unit's lock
        return null;
    }

    /**
     * Moves all of {@code other}'s fences into this set (gathering the fences of a run's units). Holds
     * {@code other}'s lock, then this one's: a gathering set is never a unit's, so the order is
     * always unit (its chunk's fence lock), then gatherer. {@code other} keeps its array, so its next fence allocates nothing.
     */
    void absorb(FenceSet other) {
        synchronized (other.lock) {
            Shared[] taken = other.byStream;
            synchronized (lock) {
                for (int i = 0; i < taken.length; i++) {
                    if (taken[i] != null) {
                        put(taken[i]);
                        taken[i] = null;
                    }
                }
                refresh();
            }
            other.refresh();
        }
    }
}
