package io.gpupool.backend;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;

import org.junit.jupiter.api.Test;

class UninterruptiblyTest {

    @Test
    void anInterruptedWaiterWaitsOnAndGetsItsInterruptBack() throws Exception {
        Object monitor = new Object();
        AtomicBoolean done = new AtomicBoolean();
        AtomicBoolean returnedEarly = new AtomicBoolean();
        AtomicBoolean interruptedAfter = new AtomicBoolean();
        CountDownLatch waiting = new CountDownLatch(1);
        Thread waiter = Thread.ofPlatform().start(() -> {
            waiting.countDown();
            Uninterruptibly.await(monitor, done::get);
            returnedEarly.set(!done.get());
            interruptedAfter.set(Thread.currentThread().isInterrupted());
        });
        assertThat(waiting.await(5, TimeUnit.SECONDS)).isTrue();
        waiter.interrupt();
        waiter.join(200);
        assertThat(waiter.isAlive()).as("still waiting after the interrupt").isTrue();

        synchronized (monitor) {
            done.set(true);
            monitor.notifyAll();
        }
        waiter.join(5_000);
        assertThat(waiter.isAlive()).isFalse();
        assertThat(returnedEarly).isFalse();
        assertThat(interruptedAfter).isTrue();
    }

    @Test
    void joinOutlastsAnInterruptAndRestoresIt() throws Exception {
        CountDownLatch release = new CountDownLatch(1);
        Thread worker = Thread.ofPlatform().start(() -> {
            try {
                release.await();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        });
        AtomicBoolean interruptedAfter = new AtomicBoolean();
        AtomicBoolean workerEndedFirst = new AtomicBoolean();
        Thread joiner = Thread.ofPlatform().start(() -> {
            Uninterruptibly.join(worker);
            workerEndedFirst.set(!worker.isAlive());
            interruptedAfter.set(Thread.currentThread().isInterrupted());
        });
        joiner.interrupt();
        joiner.join(200);
        assertThat(joiner.isAlive()).isTrue();
        release.countDown();
        joiner.join(5_000);
        assertThat(workerEndedFirst).isTrue();
        assertThat(interruptedAfter).isTrue();
    }
}
