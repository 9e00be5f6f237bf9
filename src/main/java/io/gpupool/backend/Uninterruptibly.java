package io.gpupool.backend;

import java.util.function.BooleanSupplier;

/**
 * Waits that an interrupt does not cut short, for the stream workers. What they wait for is already
 * queued and will finish, and a caller that gave up early would free memory the device may still use.
 * So an interrupted waiter keeps waiting, and its interrupt status is set again when the wait returns.
 */
public final class Uninterruptibly {

    private Uninterruptibly() {
    }

    /**
     * Blocks until {@code done} holds. {@code done} is read under {@code monitor}'s lock; whoever changes
     * what it reads must {@code notifyAll()} on {@code monitor} under that lock.
     */
    public static void await(Object monitor, BooleanSupplier done) {
        boolean interrupted = false;
        synchronized (monitor) {
            while (!done.getAsBoolean()) {
                try {
                    monitor.wait();
                }
                catch (InterruptedException e) {
                    interrupted = true;
                }
            }
        }
        if (interrupted) {
            Thread.currentThread().interrupt();
        }
    }

    /** Blocks until {@code thread} has ended. */
    public static void join(Thread thread) {
        boolean interrupted = false;
        while (true) {
            try {
                thread.join();
                break;
            }
            catch (InterruptedException e) {
                interrupted = true;
            }
        }
        if (interrupted) {
            Thread.currentThread().interrupt();
        }
    }
}
