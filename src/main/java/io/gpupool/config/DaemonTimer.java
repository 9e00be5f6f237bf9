package io.gpupool.config;

import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;

/**
 * One named daemon thread that runs a task at a fixed delay, for the configuration's periodic work (pool
 * maintenance, the idle workspace release). {@link #close()} stops it and waits, at most 10 s, for a run in
 * progress, so the task never runs against devices that are closing.
 */
final class DaemonTimer implements AutoCloseable {

    private final ScheduledExecutorService executor;

    /** Runs {@code task} every {@code periodNanos}, the first time after one period, on a thread named {@code name}. */
    DaemonTimer(String name, long periodNanos, Runnable task) {
        this.executor = Executors.newSingleThreadScheduledExecutor(runnable -> {
            Thread thread = new Thread(runnable, name);
            thread.setDaemon(true);
            return thread;
        });
        executor.scheduleWithFixedDelay(task, periodNanos, periodNanos, TimeUnit.NANOSECONDS);
    }

    @Override
    public void close() {
        executor.shutdown();
        try {
            if (!executor.awaitTermination(10, TimeUnit.SECONDS)) {
                executor.shutdownNow();
            }
        } catch (InterruptedException e) {
            executor.shutdownNow();
            Thread.currentThread().interrupt();
        }
    }
}
