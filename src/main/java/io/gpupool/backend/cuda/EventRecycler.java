package io.gpupool.backend.cuda;

import java.util.Arrays;

/**
 * A bounded stack of idle native events, so that a fence costs a record, not a create and a destroy.
 * Generic in the handle type {@code E} ({@code CUevent} in production, fake handles in tests); the
 * driver calls sit behind {@link Events}.
 *
 * <pre>
 *   spare: [ e0 | e1 | e2 |  -  |  -  ]     count = 3, capacity = 5
 *                         ^ top
 *   acquire: pop e2 (or create when empty)    release(e): push e (or destroy when full / closed)
 * </pre>
 *
 * <ol>
 *   <li>{@link #acquire}: under the monitor, pop the top spare and return it. Empty: create a new
 *       event outside the monitor (a driver call).</li>
 *   <li>{@link #release}: under the monitor, push the event unless the stack is full or the recycler
 *       is closed; otherwise destroy it outside the monitor. A released event must have no user left
 *       (its fence closed, its worker entry finished); a pending record is fine: the next record
 *       overwrites it, and waits already enqueued on other streams keep the state they captured.</li>
 *   <li>{@link #close}: mark closed, take every spare and destroy them outside the monitor. Events
 *       still held by open fences are destroyed when those fences release them later.</li>
 * </ol>
 *
 * One recycler per stream: acquires come from the thread that leases the stream, releases from
 * whichever thread drops a fence (or the stream's worker), so the monitor is rarely contended and
 * held for a few instructions; nothing on the recycling path allocates. The counters are written
 * under the monitor and volatile, so their getters never take it.
 *
 * @param <E> the event handle type
 */
final class EventRecycler<E> {

    /** Creates and destroys events (driver calls); both may throw. */
    interface Events<E> {
        E create();

        void destroy(E event);
    }

    private final Events<E> events;
    private final String owner;
    private final Object[] spare;
    private int count;
    private boolean closed;
    private volatile long created;
    private volatile long reused;
    private volatile long destroyed;

    /**
     * @param capacity most idle events kept, {@code >= 0}; 0 turns recycling off (every acquire
     *                 creates, every release destroys)
     * @param owner    names the owner in error messages, e.g. "cuda:0 stream 3"
     */
    EventRecycler(Events<E> events, int capacity, String owner) {
        if (capacity < 0) {
            throw new IllegalArgumentException("event recycler capacity must be >= 0, got " + capacity);
        }
        this.events = events;
        this.owner = owner;
        this.spare = new Object[capacity];
    }

    /** An idle event, reused when one is spare, else newly created. */
    @SuppressWarnings("unchecked")
    E acquire() {
        synchronized (this) {
            if (closed) {
                throw new IllegalStateException(owner + " is closed");
            }
            if (count > 0) {
                // fast exit: a spare event, no driver call
                E event = (E) spare[--count];
                spare[count] = null;
                reused++;
                return event;
            }
        }
        // slow exit: the stack is empty, create outside the monitor
        E event = events.create();
        synchronized (this) {
            created++;
        }
        return event;
    }

    /** Takes back an event nobody uses any more; keeps it when there is room, else destroys it. */
    void release(E event) {
        synchronized (this) {
            if (!closed && count < spare.length) {
                spare[count++] = event;
                return;
            }
            destroyed++;
        }
        events.destroy(event); // full or closed: outside the monitor
    }

    /**
     * Destroys the spare events and makes later releases destroy theirs; idempotent. Every spare is
     * destroyed even when one destroy throws; the first failure is rethrown at the end.
     */
    void close() {
        Object[] taken;
        synchronized (this) {
            if (closed) {
                return;
            }
            closed = true;
            taken = Arrays.copyOf(spare, count);
            Arrays.fill(spare, 0, count, null);
            destroyed += count;
            count = 0;
        }
        RuntimeException failure = null;
        for (Object event : taken) {
            try {
                @SuppressWarnings("unchecked")
                E typed = (E) event;
                events.destroy(typed);
            } catch (RuntimeException e) {
                if (failure == null) {
                    failure = e;
                } else {
                    failure.addSuppressed(e);
                }
            }
        }
        if (failure != null) {
            throw failure;
        }
    }

    /** Events created so far (driver calls paid). */
    long created() {
        return created;
    }

    /** Acquires served by a spare event. */
    long reused() {
        return reused;
    }

    /** Events destroyed so far (released to a full or closed recycler, or spare at close). */
    long destroyed() {
        return destroyed;
    }

    /** Spare events now (takes the monitor: for tests and benchmarks, not for metrics). */
    int spare() {
        synchronized (this) {
            return count;
        }
    }
}
