package io.gpupool.memory.pool;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.concurrent.locks.LockSupport;

/**
 * A lock for critical sections of a few array operations (a buddy order's free list, a small class's slabs):
 * acquired with one CAS, released with a release store, waited for by polling. Not reentrant, not fair.
 *
 * <pre>
 *   state  0 free, 1 held
 *   lock    CAS 0 -&gt; 1 (acquire); taken: spin, then yield, then park for growing pauses and try again
 *   unlock  store 0 (release)
 * </pre>
 *
 * <h2>Why not ReentrantLock</h2>
 * {@code ReentrantLock.unlock} writes its state with a volatile store and then looks for a queued waiter to wake: a
 * store-load barrier on every release, and a pair of locked instructions per critical section. On the Xeon hosts of
 * the GPU machines one uncontended lock and unlock costs about twice a CAS, and the global path of an allocation and
 * its free passes two to four such sections. Here a release is a plain store on x86; the price is that nobody wakes
 * a waiter, which polls instead. That suits sections that hold the lock for well under a microsecond and meet
 * rarely: the stream-local caches keep most allocations off the global level, and each order and class has a lock
 * of its own. A waiter spins {@value #SPINS} times, yields {@value #YIELDS} times, then parks for 1 µs doubling up to
 * {@value #MAX_PARK_NANOS} ns between tries: a holder that was descheduled costs the waiters its time slice, not a
 * core each.
 *
 * <p>Taking a lock this thread already holds would wait for ever; {@link #lock} detects that in its slow path (the
 * holder's thread id is recorded with a plain store after the CAS) and throws instead.
 */
final class ShortLock {

    private static final int SPINS = 128;
    private static final int YIELDS = 16;
    private static final long MAX_PARK_NANOS = 100_000;
    private static final VarHandle STATE;

    static {
        try {
            STATE = MethodHandles.lookup().findVarHandle(ShortLock.class, "state", int.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    @SuppressWarnings("unused") // accessed through STATE
    private volatile int state;
    /**
     * The id of the thread holding the lock, 0 when free; for the reentrance check only, read and written with plain
     * accesses (an id rather than the Thread: a primitive store needs no garbage-collector barrier).
     */
    private long holder;

    void lock() {
        if (!STATE.weakCompareAndSetAcquire(this, 0, 1)) {
            lockSlowly();
        }
        holder = Thread.currentThread().threadId();
    }

    void unlock() {
        holder = 0;
        STATE.setRelease(this, 0);
    }

    private void lockSlowly() {
        long self = Thread.currentThread().threadId();
        long park = 1_000;
        for (int tries = 0; ; tries++) {
            if ((int) STATE.getOpaque(this) == 0 && STATE.weakCompareAndSetAcquire(this, 0, 1)) {
                return;
            }
            if (holder == self) {
                throw new IllegalStateException("ShortLock is not reentrant: this thread already holds it");
            }
            if (tries < SPINS) {
                Thread.onSpinWait();
            } else if (tries < SPINS + YIELDS) {
                Thread.yield();
            } else {
                LockSupport.parkNanos(park);
                park = Math.min(MAX_PARK_NANOS, park * 2);
            }
        }
    }
}
