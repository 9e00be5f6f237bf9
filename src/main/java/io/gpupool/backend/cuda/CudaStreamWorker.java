package io.gpupool.backend.cuda;

import io.gpupool.backend.Uninterruptibly;
import jcuda.driver.CUevent;

import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.atomic.AtomicReference;

import static jcuda.driver.JCudaDriver.cuEventSynchronize;

/**
 * The host side of a CUDA stream: one lazily started thread that runs host work in stream order.
 *
 * <pre>
 *   GPU stream:  copy ─ kernel ─ [ev1] ─ copy ─ [ev2] ─ ...
 *   worker:             wait ev1 → task1 ; wait ev2 → task2 ; ...
 * </pre>
 *
 * <ol>
 *   <li>The stream records an event after the device work a task must follow, then {@link #submit}s
 *       (event, task, cleanup).</li>
 *   <li>The worker takes entries in order, blocks in cuEventSynchronize, runs the task, then always
 *       runs the cleanup (returning a staging buffer, recycling the event) even when the wait or the
 *       task failed.</li>
 *   <li>The first failure is kept until the stream's synchronize collects it.</li>
 * </ol>
 *
 * Later device work on the stream does not wait for a host task (the task runs beside the GPU, after
 * everything enqueued before it); host tasks among themselves and copies into host memory keep
 * stream order. {@code submitted} is written by the leasing thread, {@code completed} by the worker.
 */
final class CudaStreamWorker {

    interface Cleanup {
        void run(CUevent event);
    }

    private record Entry(CUevent event, Runnable task, Cleanup cleanup) {
    }

    private static final Entry STOP = new Entry(null, null, null);

    private final CudaDevice device;
    private final String name;
    private final LinkedBlockingQueue<Entry> queue = new LinkedBlockingQueue<>();
    private final AtomicReference<Throwable> firstFailure = new AtomicReference<>();
    private final Object progress = new Object();
    private Thread thread;
    private volatile long submitted;
    private volatile long completed;

    CudaStreamWorker(CudaDevice device, String name) {
        this.device = device;
        this.name = name;
    }

    synchronized void submit(CUevent event, Runnable task, Cleanup cleanup) {
        if (thread == null) {
            thread = Thread.ofPlatform().name(name).daemon(true).start(this::loop);
        }
        submitted++;
        queue.add(new Entry(event, task, cleanup));
    }

    /** Blocks until every entry submitted so far has been handled. */
    void drain() {
        long target = submitted;
        if (completed >= target) {
            return;
        }
        if (Thread.currentThread() == thread) {
            throw new IllegalStateException("a host task on " + name + " waits for its own stream: deadlock");
        }
        Uninterruptibly.await(progress, () -> completed >= target);
    }

    Throwable takeFailure() {
        return firstFailure.getAndSet(null);
    }

    synchronized void stop() {
        if (thread == null) {
            return;
        }
        queue.add(STOP);
        Uninterruptibly.join(thread);
        thread = null;
    }

    private void loop() {
        device.makeCurrent();
        while (true) {
            Entry entry;
            try {
                entry = queue.take();
            } catch (InterruptedException e) {
                continue;
            }
            if (entry == STOP) {
                return;
            }
            try {
                Cu.check("cuEventSynchronize", cuEventSynchronize(entry.event()), "before a host task on " + name);
                if (entry.task() != null) {
                    entry.task().run();
                }
            } catch (Throwable t) {
                firstFailure.compareAndSet(null, t);
            } finally {
                try {
                    if (entry.cleanup() != null) {
                        entry.cleanup().run(entry.event());
                    }
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
}
