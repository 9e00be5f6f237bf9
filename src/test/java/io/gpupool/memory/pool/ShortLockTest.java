package io.gpupool.memory.pool;

import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class ShortLockTest {

    /** A plain counter, read-modify-written only under the lock. */
    private long counter;

    @Test
    void threadsIncrementingUnderTheLockLoseNoUpdate() throws Exception {
        ShortLock lock = new ShortLock();
        int threads = 4;
        int perThread = 200_000;
        CountDownLatch start = new CountDownLatch(1);
        List<Thread> workers = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            workers.add(Thread.ofPlatform().start(() -> {
                awaitQuietly(start);
                for (int i = 0; i < perThread; i++) {
                    lock.lock();
                    try {
                        counter++;
                    } finally {
                        lock.unlock();
                    }
                }
            }));
        }
        start.countDown();
        for (Thread worker : workers) {
            worker.join(TimeUnit.SECONDS.toMillis(60));
        }
        assertThat(counter).isEqualTo((long) threads * perThread);
    }

    @Test
    void aWaiterGetsTheLockOnceTheHolderLetsGo() throws Exception {
        ShortLock lock = new ShortLock();
        lock.lock();
        AtomicReference<String> got = new AtomicReference<>();
        Thread waiter = Thread.ofPlatform().start(() -> {
            lock.lock();
            got.set("locked");
            lock.unlock();
        });
        Thread.sleep(50);                                          // past its spins and yields: it parks and polls
        assertThat(got.get()).as("held by the test thread").isNull();
        lock.unlock();
        waiter.join(5_000);
        assertThat(got.get()).isEqualTo("locked");
    }

    @Test
    void takingItAgainOnTheHoldingThreadFailsInsteadOfHanging() {
        ShortLock lock = new ShortLock();
        lock.lock();
        assertThatThrownBy(lock::lock).isInstanceOf(IllegalStateException.class).hasMessageContaining("not reentrant");
        lock.unlock();
        lock.lock();                                               // still usable
        lock.unlock();
    }

    private static void awaitQuietly(CountDownLatch latch) {
        try {
            latch.await();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
