package io.gpupool.backend.host;

import io.gpupool.backend.Uninterruptibly;

import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.atomic.AtomicReference;

/**
 * One platform thread draining an ordered queue of tasks: the host backend's "stream".
 *
 * <pre>
 *   caller ── submit(t1) submit(t2) submit(t3) ──▶ [ t1 | t2 | t3 ]  ──▶ worker thread runs t1, t2, t3
 *   submitted = 3                                                          completed = 1, 2, 3
 * </pre>
 *
 * <ol>
 *   <li>{@link #submit} appends a task and returns its ticket (the number of tasks submitted so far).</li>
 *   <li>The worker runs tasks one at a time in submission order. A task that throws does not stop the
 *       queue; the first failure is kept until {@link #takeFailure()} hands it out.</li>
 *   <li>After each task the worker raises {@code completed}; {@link #awaitTicket} waits for
 *       {@code completed >= ticket}, which is how fences and synchronize are built.</li>
 * </ol>
 *
 * Counters: {@code submitted} is written by the submitting thread only (a stream is leased by one
 * request at a time) and {@code completed} by the worker only; both are volatile for readers.
 */
final class OrderedWorker {

    private static final Runnable STOP = () -> { };

    private final LinkedBlockingQueue<Runnable> queue = new LinkedBlockingQueue<>();
    private final AtomicReference<Throwable> firstFailure = new AtomicReference<>();
    private final Object progress = new Object();
    private final Thread thread;
    private volatile long submitted;
    private volatile long completed;
    private volatile boolean stopped;

    OrderedWorker(String name) {
        this.thread = Thread.ofPlatform().name(name).daemon(true).unstarted(this::loop);
        this.thread.start();
    }

    /** Appends {@code task}; returns its ticket. */
    synchronized long submit(Runnable task) {
        if (stopped) {
            throw new IllegalStateException("stream " + thread.getName() + " is closed");
        }
        long ticket = ++submitted;
        queue.add(task);
        return ticket;
    }

    /**
     * Appends {@code task} unless the worker was stopped; returns false then, once every task
     * submitted before the stop has finished (so the caller may act as if {@code task} ran in order).
     */
    boolean submitOrAwaitStop(Runnable task) {
        synchronized (this) {
            if (!stopped) {
                ++submitted;
                queue.add(task);
                return true;
            }
        }
        Uninterruptibly.join(thread);
        return false;
    }

    /** The ticket of the last task submitted (0 if none). */
    long lastTicket() {
        return submitted;
    }

    boolean isDone(long ticket) {
        return completed >= ticket;
    }

    /** Blocks until every task up to {@code ticket} has run. */
    void awaitTicket(long ticket) {
        if (completed >= ticket) {
            return;
        }
        if (Thread.currentThread() == thread) {
            throw new IllegalStateException("a task on " + thread.getName() + " waits for its own stream: deadlock");
        }
        Uninterruptibly.await(progress, () -> completed >= ticket);
    }

    /** Returns and clears the first failure of a task since the last call, or null. */
    Throwable takeFailure() {
        return firstFailure.getAndSet(null);
    }

    /** Runs the queued tasks to the end, then stops the thread. Idempotent. */
    void stop() {
        synchronized (this) {
            if (stopped) {
                return;
            }
            stopped = true;
            queue.add(STOP);
        }
        Uninterruptibly.join(thread);
    }

    private void loop() {
        while (true) {
            Runnable task;
            try {
                task = queue.take();
            } catch (InterruptedException e) {
                continue; // only stop() ends the worker, so queued work is never dropped
            }
            if (task == STOP) {
                return;
            }
            try {
                task.run();
            } catch (Throwable t) {
                firstFailure.compareAndSet(null, t);
            }
            synchronized (progress) {
                completed++;
                progress.notifyAll();
            }
        }
    }
}
