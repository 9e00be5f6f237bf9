package io.gpupool.serving;

import io.gpupool.backend.ComputeDevice;
import io.gpupool.backend.DeviceStream;
import io.gpupool.kernels.StreamWorkspaces;
import io.gpupool.kernels.TensorOps;
import io.gpupool.memory.DeviceAllocator;
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
 * worker thread per stream.
 *
 * <pre>
 *   submit ──► idle stream? ──yes──► lease it, run on a worker thread ──► release ──► next queued job
 *                  │ no                                                   (same thread, no hop)
 *                  ▼
 *              queue full? ──yes──► 503 (overloaded)
 *                  │ no
 *                  ▼
 *              wait in FIFO queue (cancel = leave the queue, nothing was allocated)
 * </pre>
 *
 * <ol>
 *   <li>A job takes a <em>stream lease</em>: the stream, the allocator whose local cache belongs to
 *       that stream (the stream is the cache key, never the thread), and the device's kernels.</li>
 *   <li>The job runs on a worker thread of this device, never on a Netty event-loop thread; the
 *       device is bound to the thread first.</li>
 *   <li>When the job ends (result, failure, or its subscriber is gone) the stream goes to the oldest
 *       queued job or back to the idle set, and only then is the outcome signalled. The release
 *       happens in the worker's {@code finally}, not in a reactive signal, so a cancelled or
 *       timed-out subscriber can never leak a lease.</li>
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
 * never device work. {@link #inFlight()} and {@link #queueDepth()} read atomics and take no lock.
 */
public final class DeviceWorker implements AutoCloseable {

    private final ComputeDevice device;
    private final DeviceAllocator allocator;
    private final TensorOps ops;
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

    /** In flight plus queued: what the scheduler balances on. */
    public int load() {
        return inFlight.get() + queued.get();
    }

    /** Requests refused because the queue was full, since start. */
    public long rejectedCount() {
        return rejected.sum();
    }

    /** Queued requests whose subscriber cancelled (disconnect, timeout) before they ran, since start. */
    public long cancelledWhileQueuedCount() {
        return cancelledWhileQueued.sum();
    }

    /**
     * Runs {@code work} on a leased stream of this device. Nothing happens until subscription;
     * cancelling the subscription takes a queued job out of the queue.
     *
     * @return the work's result; fails with a 503 {@link ServingException} when the queue is full
     */
    public <T> Mono<T> submit(Function<ExecutionContext, T> work) {
        return Mono.create(sink -> {
            Job<T> job = new Job<>(work, sink);
            sink.onCancel(() -> cancel(job));
            DeviceStream stream;
            synchronized (this) {
                if (closed) {
                    sink.error(ServingException.unavailable("device " + device.index() + " is shutting down", 1));
                    return;
                }
                stream = idle.poll();
                if (stream == null) {
                    if (queue.size() >= queueCapacity) {
                        rejected.increment();
                        sink.error(ServingException.unavailable("device " + device.index() + " is overloaded: "
                                + inFlight.get() + " requests running and " + queue.size()
                                + " queued (gpupool.serving.queue-capacity=" + queueCapacity + ")", 1));
                        return;
                    }
                    queue.add(job);
                    queued.incrementAndGet();
                    lastActivityNanos = System.nanoTime();
                    return;
                }
                inFlight.incrementAndGet();
                lastActivityNanos = System.nanoTime();
            }
            dispatch(job, stream);
        });
    }

    private void dispatch(Job<?> job, DeviceStream stream) {
        try {
            workers.execute(() -> runFrom(job, stream));
        } catch (RejectedExecutionException e) {
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
            try {
                answer = job.run(new ExecutionContext(stream, allocator, ops), device);
            } finally {
                job = release(stream);
                answer.run();
            }
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
        synchronized (this) {
            if (queue.remove(job)) {
                queued.decrementAndGet();
                cancelledWhileQueued.increment();
            }
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

        Job(Function<ExecutionContext, T> work, MonoSink<T> sink) {
            this.work = work;
            this.sink = sink;
        }

        static final Runnable NOTHING = () -> { };

        /** Runs the work (unless cancelled) and returns how to signal its outcome. */
        Runnable run(ExecutionContext context, ComputeDevice device) {
            if (cancelled) {
                return NOTHING;
            }
            try {
                device.bindToCurrentThread();
                T result = work.apply(context);
                return result == null ? sink::success : () -> sink.success(result);
            } catch (Throwable failure) {
                return () -> sink.error(failure);
            }
        }
    }
}
