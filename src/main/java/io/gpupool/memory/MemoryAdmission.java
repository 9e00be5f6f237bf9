package io.gpupool.memory;

import io.gpupool.memory.metric.AdmissionMetrics;
import io.gpupool.memory.metric.LatencyDistribution;
import io.gpupool.memory.metric.Log2Histogram;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.Consumer;
import java.util.function.LongSupplier;
import java.util.function.LongUnaryOperator;

/**
 * Admission of requests to a capped pool: before a forward runs, it reserves the activation peak its
 * execution plan predicts; a request that does not fit waits, holding no device memory, until running
 * requests finish, instead of running into the cap and failing.
 *
 * <h2>Notation</h2>
 * <pre>
 *   cap       the pool's cap on reserved bytes in force (tunable, so read at every decision)
 *   resident  bytes in use in the pool that belong to no request: kernel workspaces, graph pools
 *   ceiling   cap - resident: what admitted requests may plan for together
 *   charge    a request's planned peak in the pool's blocks: its arena as the pool rounds it, or each tensor rounded
 *   admitted  the sum of the charges of the admitted, unfinished requests; running: their number
 *   limit     what the pool has shown it can hold in charges: min(ceiling, learned), see "Learning" below
 *
 *   0          resident                resident + admitted                 cap
 *   |##########|========================|....................................|
 *    workspaces  admitted requests' peaks  room: the oldest waiter enters when its charge fits
 * </pre>
 *
 * <h2>Steps</h2>
 * <ol>
 *   <li>acquire(charge): a charge above the ceiling is refused at once with an
 *       {@link OutOfDeviceMemoryException} naming the bytes needed and the ceiling: waiting cannot help,
 *       since even an idle pool would not hold it. Otherwise, when nobody waits and either the charge fits
 *       the room (under the limit) or nothing runs, the request is admitted on the caller's thread; else it
 *       joins the tail of the FIFO. An owner that must hold its ticket before any callback can run (the
 *       callback may admit, run and send back the request on other threads before {@code acquire} returns)
 *       makes it with {@link #ticket} and then calls {@link Ticket#enter}.</li>
 *   <li>release: the charge leaves {@code admitted}; then, from the head, every waiter that fits is
 *       admitted. Their callbacks run on the releasing thread after the monitor is dropped.</li>
 *   <li>cancel (timeout, disconnect): a waiting request leaves the queue and nothing else happens to it;
 *       since it may have been the head that blocked smaller ones behind it, step 2's loop runs again.
 *       An admitted request is released by its owner when it ends.</li>
 *   <li>acquireAlone: a request that ran out of memory (what ran beside it, its plan, or the pool's slabs
 *       and rounding took more than the charges said) joins a second FIFO, the alone queue, which is served
 *       before the first: it is admitted once nothing runs, and while it runs nobody else is admitted. Alone,
 *       it needs no more than it would without admission: if the pool still refuses, that refusal is final
 *       (507). Several sent back at once run one after the other in the order they were sent back, all before
 *       any waiter of the first queue.</li>
 * </ol>
 *
 * <h2>Why these rules</h2>
 * <ul>
 *   <li><b>Strict arrival order.</b> A later, smaller request never passes a waiting one, even when it
 *       would fit: under a steady load of small requests a large one would otherwise wait for ever (its
 *       room never frees all at once). The price is memory left idle while the head waits; it is bounded
 *       by the time the running requests need to finish, which is what the head waits for anyway.</li>
 *   <li><b>Nothing runs: admit the head whatever it charges.</b> The ceiling can fall below a waiter's
 *       charge after it was queued (a lower cap tuned at runtime, resident memory that grew). Alone, the
 *       request is what it would be without admission and the pool's staged recovery decides; without
 *       this rule it would wait for a release that never comes. The same holds for a plan that
 *       underestimates: the pool's staged recovery, a run alone, then its 507 stay the fallback.</li>
 *   <li><b>Resident bytes are sampled when nothing is admitted.</b> Then everything in use (the pool's
 *       allocated bytes less its local caches) belongs to no request. Resident memory changes rarely after
 *       warm-up (workspaces at start, graph pools at capture), so those moments are enough; under a load
 *       that never pauses the last sample stands. Memory that is given up while idle and taken back by the
 *       next request (kernel workspaces) would make a sample too low, so the owner may name a floor.</li>
 *   <li><b>A waiter holds nothing.</b> The caller acquires before it takes a stream or allocates, and a
 *       queued request has allocated nothing, so the running ones can always finish: no deadlock.</li>
 * </ul>
 *
 * <h2>Learning what the pool can hold</h2>
 * Charges count planned tensors in the pool's blocks, but the pool holds more than its blocks: slabs of
 * small objects are carved in whole minimum blocks, mapped memory keeps some slack, and a plan may leave a
 * tensor out. So admitted requests can run out of memory below the ceiling. When one does
 * ({@link Ticket#outOfMemory}), the learned limit drops to 3/4 of what was admitted at that moment (a
 * multiplicative decrease, as TCP's congestion window does on a loss); every request that ends without
 * running out of memory raises it by 1/32 of the ceiling (an additive increase) until the ceiling is reached
 * again. The admission then runs near the concurrency the pool sustains, instead of paying an out-of-memory,
 * the pool's staged recovery and a run alone again and again. Refusals compare with the ceiling, never the
 * limit: a request alone may fit even where several did not.
 *
 * <h2>Concurrency</h2>
 * One monitor guards the queue and the sums; it is taken twice per request (acquire, release), never per
 * allocation, and no callback or supplier that could block runs under it ({@code capBytes} and
 * {@code inUseBytes} read the pool's lock-free metrics). Metric getters read volatile copies.
 */
public final class MemoryAdmission implements AdmissionMetrics {

    private final String name;
    private final boolean enabled;
    private final LongSupplier capBytes;
    private final LongSupplier inUseBytes;
    private final LongUnaryOperator blockBytes;
    private final LongSupplier residentFloor;

    /** Guarded by {@code this}. */
    private final ArrayDeque<Ticket> waiters = new ArrayDeque<>();
    /** Tickets of {@link #acquireAlone}, oldest first, served before {@link #waiters}; guarded by {@code this}. */
    private final ArrayDeque<Ticket> aloneWaiters = new ArrayDeque<>();
    /** Written under the monitor, read without it. */
    private volatile long admitted;
    private volatile int running;
    private volatile long waitingBytes;
    private volatile long resident;
    private volatile int waitingCount;
    /** An {@link #acquireAlone} ticket is admitted: nobody else enters until it is released. */
    private volatile boolean aloneRunning;
    /** Learned bound on the admitted charges; Long.MAX_VALUE until the first out-of-memory. */
    private volatile long learned = Long.MAX_VALUE;
    /** Additive increase of {@link #learned} per request that ended without running out of memory. */
    static final int INCREASE_SHARE = 32;

    private final LongAdder admittedCount = new LongAdder();
    private final LongAdder waitedCount = new LongAdder();
    private final LongAdder refusedCount = new LongAdder();
    private final LongAdder abandonedCount = new LongAdder();
    private final LongAdder aloneCount = new LongAdder();
    private final LongAdder waitNanos = new LongAdder();
    private final Log2Histogram waitTime = new Log2Histogram();

    /**
     * @param name       the device, for messages (e.g. {@code cuda:0})
     * @param enabled    false: every request is admitted at once (counted, never refused or queued)
     * @param capBytes   the pool's cap in force
     * @param inUseBytes bytes in use in the pool now (allocated less what the local caches hold)
     * @param blockBytes the pool's rounding: bytes asked -&gt; bytes of the block it hands out
     */
    public MemoryAdmission(String name, boolean enabled, LongSupplier capBytes, LongSupplier inUseBytes,
                           LongUnaryOperator blockBytes) {
        this(name, enabled, capBytes, inUseBytes, blockBytes, () -> 0);
    }

    /**
     * @param residentFloor bytes that may belong to no request at any moment even when the idle sample saw less
     *                      (kernel workspaces a stream takes back on its next request after giving them up while
     *                      idle): the resident bytes are at least this
     */
    public MemoryAdmission(String name, boolean enabled, LongSupplier capBytes, LongSupplier inUseBytes,
                           LongUnaryOperator blockBytes, LongSupplier residentFloor) {
        this.residentFloor = Objects.requireNonNull(residentFloor, "residentFloor");
        this.name = Objects.requireNonNull(name, "name");
        this.enabled = enabled;
        this.capBytes = Objects.requireNonNull(capBytes, "capBytes");
        this.inUseBytes = Objects.requireNonNull(inUseBytes, "inUseBytes");
        this.blockBytes = Objects.requireNonNull(blockBytes, "blockBytes");
    }

    /** An admission that admits everything at once (a device without a capped pool); still counts. */
    public static MemoryAdmission unbounded(String name) {
        return new MemoryAdmission(name, false, () -> Long.MAX_VALUE, () -> 0,
                bytes -> (bytes + PoolConfig.ALIGNMENT - 1) / PoolConfig.ALIGNMENT * PoolConfig.ALIGNMENT);
    }

    /**
     * The pool's rounding of one allocation, for charging a plan: pass it to
     * {@code PlannedMemory.peakActivationBytes(batch, seq, blockBytes)}.
     */
    public long blockBytes(long bytes) {
        return blockBytes.applyAsLong(bytes);
    }

    /** A request's place in the admission: waiting, then admitted, then released; or cancelled while waiting. */
    public final class Ticket {
        private final long charge;
        private final long enqueuedNanos;
        private final Consumer<Ticket> whenAdmitted;
        private final boolean alone;
        /** Guarded by the admission's monitor. */
        private State state = State.NEW;
        /** Guarded by the admission's monitor. */
        private boolean ranOutOfMemory;

        private Ticket(long charge, Consumer<Ticket> whenAdmitted, boolean alone) {
            this.charge = charge;
            this.whenAdmitted = whenAdmitted;
            this.alone = alone;
            this.enqueuedNanos = System.nanoTime();
        }

        /** The planned bytes this request reserved. */
        public long charge() {
            return charge;
        }

        /**
         * Enters the admission's FIFO: admitted at once (the callback runs on this thread before this returns) or
         * queued. Once only.
         *
         * @throws OutOfDeviceMemoryException if the charge alone exceeds the ceiling (waiting cannot help)
         */
        public void enter() {
            MemoryAdmission.this.enter(this);
        }

        /**
         * Leaves the queue if still waiting.
         *
         * @return true if the request was waiting (its callback will never run), false if it was admitted already
         */
        public boolean cancel() {
            return MemoryAdmission.this.cancel(this);
        }

        /** Gives the charge back once the request's memory is freed; idempotent, a no-op unless admitted. */
        public void release() {
            MemoryAdmission.this.release(this);
        }

        /**
         * Tells the admission that this admitted request ran out of memory (call before {@link #release}):
         * the limit falls to 3/4 of the charges admitted now, so fewer run beside each other.
         */
        public void outOfMemory() {
            MemoryAdmission.this.outOfMemory(this);
        }
    }

    /** NEW: made, not yet entered; REFUSED: entered and refused at once (waiting could not help). */
    private enum State { NEW, WAITING, ADMITTED, RELEASED, CANCELLED, REFUSED }

    /**
     * A ticket for {@code charge} planned bytes that has not entered yet: its owner keeps it first and then calls
     * {@link Ticket#enter}, so that a ticket admitted, run and sent back on other threads before {@code enter}
     * returns is already the one the owner holds (with {@link #acquire} the owner learns it only on return).
     */
    public Ticket ticket(long charge, Consumer<Ticket> whenAdmitted) {
        if (charge < 0) {
            throw new IllegalArgumentException("charge = " + charge + " is invalid; allowed: >= 0");
        }
        return new Ticket(charge, Objects.requireNonNull(whenAdmitted, "whenAdmitted"), false);
    }

    /** As {@link #ticket}, for a request that ran out of memory: {@link Ticket#enter} queues it as {@link #acquireAlone}. */
    public Ticket aloneTicket(long charge, Consumer<Ticket> whenAdmitted) {
        return new Ticket(Math.max(0, charge), Objects.requireNonNull(whenAdmitted, "whenAdmitted"), true);
    }

    /**
     * Reserves {@code charge} planned bytes. When admitted at once, {@code whenAdmitted} runs on this
     * thread before this returns; otherwise later, on the thread that releases or cancels what made room.
     *
     * @return the ticket, to cancel while waiting and to release once the request ended
     * @throws OutOfDeviceMemoryException if the charge alone exceeds the ceiling (waiting cannot help)
     */
    public Ticket acquire(long charge, Consumer<Ticket> whenAdmitted) {
        Ticket ticket = ticket(charge, whenAdmitted);
        ticket.enter();
        return ticket;
    }

    /**
     * Reserves {@code charge} again for a request that ran out of memory: ahead of every waiter of
     * {@link #acquire} and behind the requests sent back before it, admitted once nothing runs, and nobody
     * else is admitted while it runs. Never refused.
     * {@code whenAdmitted} runs as for {@link #acquire}.
     */
    public Ticket acquireAlone(long charge, Consumer<Ticket> whenAdmitted) {
        Ticket ticket = aloneTicket(charge, whenAdmitted);
        ticket.enter();
        return ticket;
    }

    private void enter(Ticket ticket) {
        if (ticket.alone) {
            enterAlone(ticket);
            return;
        }
        boolean now;
        synchronized (this) {
            requireNew(ticket);
            if (running == 0) {
                sampleResident();
            }
            long ceiling = ceilingBytes();
            if (enabled && ticket.charge > ceiling) {
                ticket.state = State.REFUSED;
                refusedCount.increment();
                throw refusal(ticket.charge, ceiling);
            }
            now = !enabled || waiters.isEmpty() && aloneWaiters.isEmpty()
                    && (running == 0 || !aloneRunning && admitted + ticket.charge <= limit());
            if (now) {
                admit(ticket);
            } else {
                ticket.state = State.WAITING;
                waiters.add(ticket);
                waitingBytes += ticket.charge;
                waitingCount = waiters.size() + aloneWaiters.size();
            }
        }
        if (now) {
            ticket.whenAdmitted.accept(ticket);
        }
    }

    private void enterAlone(Ticket ticket) {
        List<Ticket> woken;
        synchronized (this) {
            requireNew(ticket);
            aloneCount.increment();
            ticket.state = State.WAITING;
            aloneWaiters.add(ticket);
            waitingBytes += ticket.charge;
            woken = admitWaiters();
        }
        wake(woken);
    }

    private static void requireNew(Ticket ticket) {
        if (ticket.state != State.NEW) {
            throw new IllegalStateException("a ticket enters the admission once; this one is " + ticket.state);
        }
    }

    private boolean cancel(Ticket ticket) {
        List<Ticket> woken;
        synchronized (this) {
            if (ticket.state != State.WAITING) {
                return false;
            }
            (ticket.alone ? aloneWaiters : waiters).remove(ticket);
            ticket.state = State.CANCELLED;
            waitingBytes -= ticket.charge;
            waitingCount = waiters.size() + aloneWaiters.size();
            abandonedCount.increment();
            woken = admitWaiters();
        }
        wake(woken);
        return true;
    }

    private synchronized void outOfMemory(Ticket ticket) {
        if (ticket.state != State.ADMITTED || ticket.ranOutOfMemory || !enabled || ticket.charge == 0) {
            return;                        // a request without a plan says nothing about what charges the pool holds
        }
        ticket.ranOutOfMemory = true;
        learned = Math.min(learned, admitted - admitted / 4);
    }

    private void release(Ticket ticket) {
        List<Ticket> woken;
        synchronized (this) {
            if (ticket.state != State.ADMITTED) {
                return;
            }
            if (!ticket.ranOutOfMemory && learned != Long.MAX_VALUE) {
                long ceiling = ceilingBytes();
                long raised = learned + Math.max(1, ceiling / INCREASE_SHARE);
                learned = raised >= ceiling ? Long.MAX_VALUE : raised;
            }
            ticket.state = State.RELEASED;
            admitted -= ticket.charge;
            running--;
            if (ticket.alone) {
                aloneRunning = false;
            }
            if (running == 0) {
                sampleResident();
            }
            woken = admitWaiters();
        }
        wake(woken);
    }

    /**
     * Admits waiters from the head while they fit (the head whatever it charges when nothing runs): the alone
     * queue's head first, which only ever enters once nothing runs.
     */
    private List<Ticket> admitWaiters() {
        List<Ticket> woken = List.of();
        long ceiling = limit();
        Ticket head;
        while ((head = nextWaiter()) != null
                && (running == 0 || !aloneRunning && !head.alone && admitted + head.charge <= ceiling)) {
            (head.alone ? aloneWaiters : waiters).pollFirst();
            waitingBytes -= head.charge;
            admit(head);
            waitedCount.increment();
            if (woken.isEmpty()) {
                woken = new ArrayList<>(2);
            }
            woken.add(head);
        }
        waitingCount = waiters.size() + aloneWaiters.size();
        return woken;
    }

    private Ticket nextWaiter() {
        Ticket alone = aloneWaiters.peekFirst();
        return alone != null ? alone : waiters.peekFirst();
    }

    private void admit(Ticket ticket) {
        ticket.state = State.ADMITTED;
        if (ticket.alone) {
            aloneRunning = true;
        }
        admitted += ticket.charge;
        running++;
        admittedCount.increment();
        long waited = System.nanoTime() - ticket.enqueuedNanos;
        waitTime.record(waited);
        waitNanos.add(waited);
    }

    private static void wake(List<Ticket> woken) {
        for (Ticket ticket : woken) {
            ticket.whenAdmitted.accept(ticket);
        }
    }

    private void sampleResident() {
        resident = Math.max(0, inUseBytes.getAsLong());
    }

    private OutOfDeviceMemoryException refusal(long charge, long ceiling) {
        long cap = capBytes.getAsLong();
        return new OutOfDeviceMemoryException(charge, "the request needs " + charge + " bytes of activations at its "
                + "peak, more than the " + ceiling + " bytes the pool on " + name + " can ever give a request (its cap of "
                + cap + " bytes less " + residentBytes() + " bytes resident); waiting would not help: send a smaller batch "
                + "or shorter sequences, or raise gpupool.memory.cap-bytes");
    }

    // ------------------------------------------------------------------ metrics

    @Override
    public boolean enabled() {
        return enabled;
    }

    @Override
    public int waiting() {
        return waitingCount;
    }

    @Override
    public long waitingBytes() {
        return waitingBytes;
    }

    @Override
    public long admittedBytes() {
        return admitted;
    }

    @Override
    public int running() {
        return running;
    }

    @Override
    public long ceilingBytes() {
        return Math.max(0, capBytes.getAsLong() - residentBytes());
    }

    @Override
    public long limitBytes() {
        return Math.min(ceilingBytes(), learned);
    }

    private long limit() {
        return limitBytes();
    }

    @Override
    public long residentBytes() {
        return Math.max(resident, residentFloor.getAsLong());
    }

    /**
     * Planned bytes that fit beside the admitted requests now: the limit less what is admitted (a newcomer
     * still queues behind any waiter). Read without the monitor, so approximate.
     */
    public long availableBytes() {
        return Math.max(0, limitBytes() - admitted);
    }

    @Override
    public long admittedCount() {
        return admittedCount.sum();
    }

    @Override
    public long waitedCount() {
        return waitedCount.sum();
    }

    @Override
    public long refusedCount() {
        return refusedCount.sum();
    }

    @Override
    public long abandonedCount() {
        return abandonedCount.sum();
    }

    @Override
    public long aloneCount() {
        return aloneCount.sum();
    }

    @Override
    public long waitNanos() {
        return waitNanos.sum();
    }

    @Override
    public LatencyDistribution waitTime() {
        return waitTime;
    }
}
