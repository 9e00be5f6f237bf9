package io.gpupool.serving;

import io.gpupool.backend.ComputeDevice;
import io.gpupool.backend.DeviceStream;
import io.gpupool.kernels.StreamWorkspaces;
import io.gpupool.kernels.TensorOps;
import io.gpupool.memory.DeviceAllocator;
import io.gpupool.memory.MemoryAdmission;
import io.gpupool.memory.OutOfDeviceMemoryException;
import io.gpupool.model.ExecutionContext;
import reactor.core.publisher.Mono;
import reactor.core.publisher.MonoSink;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.Function;

/**
 * Runs requests on one device: a fixed set of streams, a bounded queue in front of them and one
 * worker thread per stream, behind the device's {@link MemoryAdmission}.
 *
 * <pre>
 *   submit(charge) ──► queues full? ──yes──► 503 (overloaded)
 *                          │ no
 *                          ▼
 *                  admission: charge &gt; ceiling? ──yes──► 507 at once (waiting cannot help)
 *                          │ fits now?  ──no──► wait for memory in FIFO (cancel = leave, nothing held)
 *                          ▼ admitted
 *                  idle stream? ──yes──► lease it, run on a worker thread ──► release memory, then the stream
 *                          │ no                                                ──► next queued job (same thread)
 *                          ▼
 *                  wait for a stream in FIFO (cancel = leave the queue and give the charge back)
 * </pre>
 *
 * <ol>
 *   <li>A job first reserves its planned activation peak (its charge) in the admission, then takes a
 *       stream: memory first, so that a job waiting for memory holds no stream and no memory, and the
 *       streams stay with jobs that can run. Jobs of charge 0 (warm-up, unplanned models) pass through
 *       the same FIFO.</li>
 *   <li>A job takes a <em>stream lease</em>: the stream, the allocator whose local cache belongs to
 *       that stream (the stream is the cache key, never the thread), and the device's kernels.</li>
 *   <li>The job runs on a worker thread of this device, never on a Netty event-loop thread; the
 *       device is bound to the thread first.</li>
 *   <li>When the job ends (result, failure, or its subscriber is gone) its charge goes back to the
 *       admission (the work freed its blocks before returning), the stream goes to the oldest
 *       queued job or back to the idle set, and only then is the outcome signalled. The release
 *       happens in the worker's {@code finally}, not in a reactive signal, so a cancelled or
 *       timed-out subscriber can never leak a lease.</li>
 *   <li>A job that fails with out-of-memory (other admitted jobs, or the pool's rounding and slabs, held
 *       more than the charges said) is not answered at once: it goes back ahead of the admission's waiters (behind
 *       jobs sent back before it) and runs once more alone ({@link MemoryAdmission#acquireAlone}). Only a job that runs out of memory
 *       alone is answered 507.</li>
 *   <li>Cancelling a queued job removes it from the queue; cancelling a running job lets it finish
 *       (device work cannot be interrupted) and drops its result; the model frees its memory as
 *       always.</li>
 * </ol>
 *
 * <p>Between requests the kernels may hold per-stream memory from the pool (a library's workspace,
 * {@link StreamWorkspaces}). {@link #releaseIdleWorkspaces()} gives it back for the streams that are idle:
 * it leases each idle stream in turn, as a job would (so no request starts on it meanwhile; one that
 * arrives queues behind that lease, microseconds), releases its workspace on the calling thread and hands
 * the stream on (oldest queued job first, as {@code release} does). {@link #idleNanos()} tells the owner
 * how long the device has had nothing to do.
 *
 * <p>All state changes happen under this object's monitor; the sections are a few field updates,
 * never device work. The admission's monitor and this one are never held together: admission
 * callbacks run after the admission dropped its monitor, and this class calls the admission outside
 * its own. {@link #inFlight()} and {@link #queueDepth()} read atomics and take no lock.
 */
public final class DeviceWorker implements AutoCloseable {

    private final ComputeDevice device;
    private final DeviceAllocator allocator;
    private final TensorOps ops;
    private final MemoryAdmission admission;
    private final int queueCapacity;
    private final List<DeviceStream> streams;
    private final ExecutorService workers;

    /** Guarded by {@code this}. */
    private final ArrayDeque<DeviceStream> idle = new ArrayDeque<>();
    /** Guarded by {@code this}. */
    private final ArrayDeque<Job<?>> queue = new ArrayDeque<>();
    /** Guarded by {@code this}. */
    private boolean closed;

    /** Written under the monitor, read without it (load balancing, metrics). */
    private final AtomicInteger inFlight = new AtomicInteger();
    private final AtomicInteger queued = new AtomicInteger();
    private final LongAdder rejected = new LongAdder();
    private final LongAdder cancelledWhileQueued = new LongAdder();
    /** System.nanoTime() of the last job accepted or finished; written under the monitor, read without it. */
    private volatile long lastActivityNanos = System.nanoTime();

    /**
     * @param streamCount   streams (and worker threads) on this device, at least 1
     * @param queueCapacity jobs that may wait for a stream; one more is refused with 503
     */
    public DeviceWorker(ComputeDevice device, DeviceAllocator allocator, TensorOps ops, int streamCount,
                        int queueCapacity) {
        this(device, allocator, ops, streamCount, queueCapacity, MemoryAdmission.unbounded("device " + device.index()));
    }

    /**
     * @param admission decides when a job's planned memory is there; one per device, in front of its pool
     */
    public DeviceWorker(ComputeDevice device, DeviceAllocator allocator, TensorOps ops, int streamCount,
                        int queueCapacity, MemoryAdmission admission) {
        this.admission = java.util.Objects.requireNonNull(admission, "admission");
        if (streamCount < 1) {
            throw new IllegalArgumentException("streamCount must be at least 1, was " + streamCount);
        }
        if (queueCapacity < 0) {
            throw new IllegalArgumentException("queueCapacity must not be negative, was " + queueCapacity);
        }
        this.device = device;
        this.allocator = allocator;
        this.ops = ops;
        this.queueCapacity = queueCapacity;
        List<DeviceStream> created = new ArrayList<>(streamCount);
        for (int i = 0; i < streamCount; i++) {
            created.add(device.createStream(i));
        }
        this.streams = List.copyOf(created);
        this.idle.addAll(created);
        this.workers = Executors.newFixedThreadPool(streamCount,
                Thread.ofPlatform().name("gpupool-dev" + device.index() + "-", 0).daemon(true).factory());
    }

    public ComputeDevice device() {
        return device;
    }

    public DeviceAllocator allocator() {
        return allocator;
    }

    public TensorOps ops() {
        return ops;
    }

    /** The admission in front of this device's pool. */
    public MemoryAdmission admission() {
        return admission;
    }

    public List<DeviceStream> streams() {
        return streams;
    }

    /** Jobs holding a stream now. */
    public int inFlight() {
        return inFlight.get();
    }

    /** Jobs waiting for a stream now. */
    public int queueDepth() {
        return queued.get();
    }

    /** In flight plus queued for a stream or for memory: what the scheduler balances on. */
    public int load() {
        return inFlight.get() + queued.get() + admission.waiting();
    }

    /** Requests refused because the queue was full, since start. */
    public long rejectedCount() {
        return rejected.sum();
    }

    /** Queued requests whose subscriber cancelled (disconnect, timeout) before they ran, since start. */
    public long cancelledWhileQueuedCount() {
        return cancelledWhileQueued.sum();
    }

    /** Runs {@code work}, which plans no device memory of its own (charge 0), as {@link #submit(long, Function)}. */
    public <T> Mono<T> submit(Function<ExecutionContext, T> work) {
        return submit(0, work);
    }

    /**
     * Runs {@code work} on a leased stream of this device once {@code charge} planned bytes are admitted.
     * Nothing happens until subscription; cancelling the subscription takes a job waiting for memory or
     * for a stream out of its queue.
     *
     * @param charge the work's planned activation peak in bytes (0: none planned)
     * @return the work's result; fails with a 503 {@link ServingException} when the queues are full, with an
     * {@link OutOfDeviceMemoryException} (507) when the charge alone exceeds what the pool can ever give
     */
    public <T> Mono<T> submit(long charge, Function<ExecutionContext, T> work) {
        return Mono.create(sink -> {
            Job<T> job = new Job<>(work, sink, charge);
            sink.onCancel(() -> cancel(job));
            synchronized (this) {
                if (closed) {
                    sink.error(ServingException.unavailable("device " + device.index() + " is shutting down", 1));
                    return;
                }
                int memoryWaiters = admission.waiting();
                if ((idle.isEmpty() || memoryWaiters > 0) && queue.size() + memoryWaiters >= queueCapacity) {
                    rejected.increment();
                    sink.error(ServingException.unavailable("device " + device.index() + " is overloaded: "
                            + inFlight.get() + " requests running, " + queue.size() + " queued for a stream and "
                            + memoryWaiters + " for memory (gpupool.serving.queue-capacity=" + queueCapacity + ")", 1));
                    return;
                }
            }
            // The job holds its ticket before it enters: once admitted it may run, run out of memory and be sent
            // back with a new ticket on other threads before enter() returns, and that ticket must not be
            // replaced by this one afterwards (its charge would never be given back).
            MemoryAdmission.Ticket ticket = admission.ticket(charge, admitted -> admitted(job));
            job.ticket = ticket;
            try {
                ticket.enter();
            } catch (OutOfDeviceMemoryException refused) {
                sink.error(refused);
                return;
            }
            if (job.cancelled) {
                ticket.cancel();                                   // cancelled while entering
            }
        });
    }

    /** The job's memory is reserved: lease a stream now, or wait for one. Runs on the thread that made room. */
    private void admitted(Job<?> job) {
        MemoryAdmission.Ticket ticket = job.ticket;
        DeviceStream stream;
        synchronized (this) {
            if (closed || job.cancelled) {
                stream = null;
            } else {
                stream = idle.poll();
                if (stream == null) {
                    queue.add(job);                                // counted against the capacity at submit
                    queued.incrementAndGet();
                    lastActivityNanos = System.nanoTime();
                    return;
                }
                inFlight.incrementAndGet();
                lastActivityNanos = System.nanoTime();
            }
        }
        if (stream == null) {
            ticket.release();
            if (!job.cancelled) {
                job.sink.error(ServingException.unavailable("device " + device.index() + " is shutting down", 1));
            }
            return;
        }
        dispatch(job, stream);
    }

    private void dispatch(Job<?> job, DeviceStream stream) {
        try {
            workers.execute(() -> runFrom(job, stream));
        } catch (RejectedExecutionException e) {
            job.releaseMemory();
            job.sink.error(ServingException.unavailable("device " + device.index() + " is shutting down", 1));
            Job<?> next = release(stream);
            if (next != null) {
                dispatch(next, stream);
            }
        }
    }

    /**
     * Runs {@code first} and then queued jobs on {@code stream} until the queue is empty. Each job's
     * result is signalled after its lease went back, so a client that sees its answer sees the stream free.
     */
    private void runFrom(Job<?> first, DeviceStream stream) {
        Job<?> job = first;
        while (job != null) {
            Runnable answer = Job.NOTHING;
            boolean again = false;
            try {
                answer = job.run(new ExecutionContext(stream, allocator, ops), device);
            } finally {
                // Out of memory: what ran beside it (or the pool's rounding and slabs) held more than the charges
                // said. Alone, with the pool's caches and slabs emptied by then, it needs no more than it would
                // without admission, so it runs once more alone; only that run's out-of-memory is answered.
                // Whether others ran at the moment of the failure cannot be read back reliably (they may have
                // finished since), so every first out-of-memory is retried.
                boolean outOfMemory = job.failure instanceof OutOfDeviceMemoryException;
                again = outOfMemory && !job.ranAlone && !job.cancelled && admission.enabled();
                MemoryAdmission.Ticket held = job.ticket;
                if (outOfMemory && held != null) {
                    held.outOfMemory();                            // fewer run together from now on
                }
                job.releaseMemory();                               // the work freed its blocks: make room first
                Job<?> ran = job;
                job = release(stream);
                if (again) {
                    runAlone(ran);
                } else {
                    answer.run();
                }
            }
        }
    }

    /**
     * Queues {@code job} again ahead of the admission's waiters (behind jobs sent back before it), to run once
     * nothing else does.
     */
    private void runAlone(Job<?> job) {
        job.ranAlone = true;
        job.failure = null;
        MemoryAdmission.Ticket ticket = admission.aloneTicket(job.charge, admitted -> admitted(job));
        job.ticket = ticket;                                       // before it enters, as in submit
        ticket.enter();
        if (job.cancelled) {
            ticket.cancel();
        }
    }

    /** Hands {@code stream} to the oldest queued job (returned), or back to the idle set (null). */
    private synchronized Job<?> release(DeviceStream stream) {
        lastActivityNanos = System.nanoTime();
        Job<?> next = queue.poll();
        if (next != null) {
            queued.decrementAndGet();
            return next;
        }
        inFlight.decrementAndGet();
        idle.push(stream);
        return null;
    }

    /** Nanoseconds since the last request was accepted or finished; 0 while one runs or waits. */
    public long idleNanos() {
        return load() > 0 ? 0 : Math.max(0, System.nanoTime() - lastActivityNanos);
    }

    /**
     * Gives back the kernels' workspaces ({@link TensorOps#workspaces()}) of every stream that is idle now;
     * streams running a request keep theirs, captured ones stay (see {@link StreamWorkspaces}). Runs on the
     * calling thread, with the device bound to it.
     *
     * @return the bytes given back to the pool
     */
    public long releaseIdleWorkspaces() {
        StreamWorkspaces workspaces = ops.workspaces().orElse(null);
        if (workspaces == null || workspaces.heldBytes() == workspaces.capturedBytes()) {
            return 0;                                    // nothing that could go back: no lease taken
        }
        long bytes = 0;
        boolean bound = false;
        for (DeviceStream candidate : streams) {
            DeviceStream stream;
            synchronized (this) {
                if (closed || !idle.remove(candidate)) {
                    continue;                            // running a request, or shutting down: keeps its own
                }
                stream = candidate;
            }
            try {
                if (!bound) {
                    device.bindToCurrentThread();
                    bound = true;
                }
                bytes += workspaces.release(stream);
            } finally {
                handOn(stream);
            }
        }
        return bytes;
    }

    /** Gives a stream leased outside a job to the oldest queued job, or back to the idle set. */
    private void handOn(DeviceStream stream) {
        Job<?> next;
        synchronized (this) {
            next = queue.poll();
            if (next == null) {
                idle.push(stream);
                return;
            }
            queued.decrementAndGet();
            inFlight.incrementAndGet();
        }
        dispatch(next, stream);
    }

    private void cancel(Job<?> job) {
        job.cancelled = true;
        MemoryAdmission.Ticket ticket = job.ticket;
        if (ticket != null && ticket.cancel()) {
            cancelledWhileQueued.increment();                      // left the memory queue
            return;
        }
        boolean removed;
        synchronized (this) {
            removed = queue.remove(job);
            if (removed) {
                queued.decrementAndGet();
                cancelledWhileQueued.increment();
            }
        }
        if (removed) {
            job.releaseMemory();
        }
    }

    /** Refuses new work, waits for running work (up to 30 s) and destroys the streams. */
    @Override
    public void close() {
        List<Job<?>> dropped;
        synchronized (this) {
            closed = true;
            dropped = new ArrayList<>(queue);
            queue.clear();
            queued.set(0);
        }
        for (Job<?> job : dropped) {
            job.releaseMemory();
            job.sink.error(ServingException.unavailable("device " + device.index() + " is shutting down", 1));
        }
        workers.shutdown();
        try {
            workers.awaitTermination(30, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        for (DeviceStream stream : streams) {
            stream.close();
        }
    }

    private static final class Job<T> {
        private final Function<ExecutionContext, T> work;
        private final MonoSink<T> sink;
        private volatile boolean cancelled;
        /** The job's ticket in the admission, set before the ticket enters (a run alone gets a new one). */
        private volatile MemoryAdmission.Ticket ticket;
        private final long charge;
        /** What the last run threw, read by the worker thread that ran it. */
        private Throwable failure;
        /** Set once the job was queued to run alone after an out-of-memory beside others. */
        private volatile boolean ranAlone;

        Job(Function<ExecutionContext, T> work, MonoSink<T> sink, long charge) {
            this.work = work;
            this.sink = sink;
            this.charge = charge;
        }

        static final Runnable NOTHING = () -> { };

        /** Gives the job's charge back (idempotent); the job holds no memory of its own any more. */
        void releaseMemory() {
            MemoryAdmission.Ticket held = ticket;
            if (held != null) {
                held.release();
            }
        }

        /** Runs the work (unless cancelled) and returns how to signal its outcome. */
        Runnable run(ExecutionContext context, ComputeDevice device) {
            if (cancelled) {
                return NOTHING;
            }
            try {
                device.bindToCurrentThread();
                T result = work.apply(context);
                return result == null ? sink::success : () -> sink.success(result);
            } catch (Throwable thrown) {
                failure = thrown;
                return () -> sink.error(thrown);
            }
        }
    }
}
