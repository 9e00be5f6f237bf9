package io.gpupool.serving;

import io.gpupool.serving.fake.CountingAllocator;
import io.gpupool.serving.fake.FakeDevice;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import reactor.core.Disposable;
import reactor.core.publisher.Mono;

import java.time.Duration;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;

import static io.gpupool.serving.InferenceEndpointsTest.await;
import static io.gpupool.serving.InferenceEndpointsTest.waitFor;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/** Stream leases, the bounded queue and cancellation of one device. */
class DeviceWorkerTest {

    private final FakeDevice device = new FakeDevice(0);
    private final CountingAllocator allocator = new CountingAllocator(1 << 20);
    private final DeviceWorker worker = new DeviceWorker(device, allocator, null, 1, 2);

    @AfterEach
    void close() {
        worker.close();
    }

    @Test
    void cancellingAQueuedRequestTakesItOutOfTheQueueAndItNeverRuns() throws Exception {
        CountDownLatch release = new CountDownLatch(1);
        CountDownLatch started = new CountDownLatch(1);
        Disposable running = worker.submit(ctx -> {
            started.countDown();
            await(release);
            return "first";
        }).subscribe();
        assertThat(started.await(5, TimeUnit.SECONDS)).isTrue();
        AtomicBoolean secondRan = new AtomicBoolean();
        Disposable queued = worker.submit(ctx -> {
            secondRan.set(true);
            return "second";
        }).subscribe();
        assertThat(worker.queueDepth()).isEqualTo(1);

        queued.dispose(); // what a client disconnect does to the response subscription

        assertThat(worker.queueDepth()).isZero();
        assertThat(worker.cancelledWhileQueuedCount()).isEqualTo(1);
        release.countDown();
        waitFor(() -> worker.inFlight() == 0);
        assertThat(secondRan).isFalse();
        assertThat(worker.submit(ctx -> "third").block(Duration.ofSeconds(5))).isEqualTo("third");
        running.dispose();
    }

    @Test
    void workRunsOnTheDeviceThreadsWithTheLeasedStreamAndAllocator() {
        AtomicReference<String> thread = new AtomicReference<>();
        String result = worker.submit(ctx -> {
            thread.set(Thread.currentThread().getName());
            assertThat(ctx.stream().device()).isSameAs(device);
            assertThat(ctx.allocator()).isSameAs(allocator);
            return "done";
        }).block(Duration.ofSeconds(5));
        assertThat(result).isEqualTo("done");
        assertThat(thread.get()).startsWith("gpupool-dev0-").isNotEqualTo(Thread.currentThread().getName());
    }

    @Test
    void aFailedRequestStillReturnsItsStream() {
        for (int i = 0; i < 3; i++) {
            assertThatThrownBy(() -> worker.submit(ctx -> {
                throw new IllegalStateException("boom");
            }).block(Duration.ofSeconds(5))).hasMessageContaining("boom");
        }
        assertThat(worker.inFlight()).isZero();
        assertThat(worker.submit(ctx -> 1).block(Duration.ofSeconds(5))).isEqualTo(1);
    }

    @Test
    void queueBeyondCapacityIsRefusedWith503() throws Exception {
        CountDownLatch release = new CountDownLatch(1);
        CountDownLatch started = new CountDownLatch(1);
        Disposable running = worker.submit(ctx -> {
            started.countDown();
            await(release);
            return 0;
        }).subscribe();
        assertThat(started.await(5, TimeUnit.SECONDS)).isTrue();
        Disposable q1 = worker.submit(ctx -> 1).subscribe();
        Disposable q2 = worker.submit(ctx -> 2).subscribe();
        assertThatThrownBy(() -> worker.submit(ctx -> 3).block(Duration.ofSeconds(5)))
                .isInstanceOfSatisfying(ServingException.class, e -> {
                    assertThat(e.status()).isEqualTo(503);
                    assertThat(e.retryAfterSeconds()).isEqualTo(1);
                    assertThat(e.getMessage()).contains("queue-capacity=2");
                });
        assertThat(worker.rejectedCount()).isEqualTo(1);
        release.countDown();
        waitFor(() -> worker.load() == 0);
        running.dispose();
        q1.dispose();
        q2.dispose();
    }

    @Test
    void closeRefusesQueuedWorkAndDestroysTheStreams() throws Exception {
        CountDownLatch release = new CountDownLatch(1);
        CountDownLatch started = new CountDownLatch(1);
        worker.submit(ctx -> {
            started.countDown();
            await(release);
            return 0;
        }).subscribe();
        assertThat(started.await(5, TimeUnit.SECONDS)).isTrue();
        Mono<Integer> queued = worker.submit(ctx -> 1).cache();
        queued.subscribe(v -> { }, e -> { });
        Thread closer = Thread.ofPlatform().start(worker::close);
        waitFor(() -> worker.queueDepth() == 0);
        release.countDown();
        closer.join(10_000);
        assertThatThrownBy(() -> queued.block(Duration.ofSeconds(5))).hasMessageContaining("shutting down");
        assertThat(device.openStreams).hasValue(0);
    }
    /**
     * A job that fails with out-of-memory on its first run (after {@code fail} opens), then records {@code name}
     * in {@code ran} on its run alone.
     */
    private static java.util.function.Function<io.gpupool.model.ExecutionContext, String> failsOnceThenRecords(
            String name, CountDownLatch started, CountDownLatch fail, java.util.List<String> ran) {
        java.util.concurrent.atomic.AtomicInteger runs = new java.util.concurrent.atomic.AtomicInteger();
        return ctx -> {
            if (runs.getAndIncrement() == 0) {
                started.countDown();
                await(fail);
                throw new io.gpupool.memory.OutOfDeviceMemoryException(10, "out of device memory: " + name);
            }
            ran.add(name);
            return name;
        };
    }

    @Test
    void twoRequestsSentBackToRunAloneRunInTheOrderTheyRanOutOfMemory() throws Exception {
        io.gpupool.memory.MemoryAdmission admission = new io.gpupool.memory.MemoryAdmission("device 0", true,
                () -> 100, () -> 0, bytes -> bytes);
        try (DeviceWorker capped = new DeviceWorker(new FakeDevice(1), allocator, null, 3, 4, admission)) {
            java.util.List<String> ran = new java.util.concurrent.CopyOnWriteArrayList<>();
            CountDownLatch holderStarted = new CountDownLatch(1);
            CountDownLatch releaseHolder = new CountDownLatch(1);
            CountDownLatch firstStarted = new CountDownLatch(1);
            CountDownLatch failFirst = new CountDownLatch(1);
            CountDownLatch secondStarted = new CountDownLatch(1);
            CountDownLatch failSecond = new CountDownLatch(1);
            Mono<String> holder = capped.submit(10, ctx -> {
                holderStarted.countDown();
                await(releaseHolder);
                return "holder";
            }).cache();
            holder.subscribe();
            Mono<String> first = capped.submit(10, failsOnceThenRecords("first", firstStarted, failFirst, ran)).cache();
            first.subscribe();
            Mono<String> second = capped.submit(10, failsOnceThenRecords("second", secondStarted, failSecond, ran))
                    .cache();
            second.subscribe();
            assertThat(holderStarted.await(5, TimeUnit.SECONDS)).isTrue();
            assertThat(firstStarted.await(5, TimeUnit.SECONDS)).isTrue();
            assertThat(secondStarted.await(5, TimeUnit.SECONDS)).isTrue();

            failFirst.countDown();                             // sent back first; waits: two still run
            waitFor(() -> admission.waiting() == 1);
            failSecond.countDown();                            // sent back second; waits for the holder
            waitFor(() -> admission.waiting() == 2);
            assertThat(ran).isEmpty();
            releaseHolder.countDown();

            assertThat(holder.block(Duration.ofSeconds(5))).isEqualTo("holder");
            assertThat(first.block(Duration.ofSeconds(5))).isEqualTo("first");
            assertThat(second.block(Duration.ofSeconds(5))).isEqualTo("second");
            assertThat(ran).as("each alone, in the order they were sent back").containsExactly("first", "second");
            assertThat(admission.aloneCount()).isEqualTo(2);
            assertThat(admission.admittedBytes()).isZero();
        }
    }

    /**
     * Many threads submit jobs that run out of memory on their first run and are sent back to run alone. A job can
     * be admitted, run, sent back with a new ticket and admitted again before the thread that submitted it returns
     * from the admission; the charge of every run must still be given back, or the admission stays wedged.
     */
    @Test
    void jobsSentBackToRunAloneUnderContentionGiveEveryChargeBack() throws Exception {
        io.gpupool.memory.MemoryAdmission admission = new io.gpupool.memory.MemoryAdmission("device 0", true,
                () -> 1 << 20, () -> 0, bytes -> bytes);
        try (DeviceWorker capped = new DeviceWorker(new FakeDevice(1), allocator, null, 2, 10_000, admission)) {
            int threads = 6;
            int jobsPerThread = 300;
            java.util.concurrent.atomic.AtomicInteger answered = new java.util.concurrent.atomic.AtomicInteger();
            CountDownLatch allAnswered = new CountDownLatch(threads * jobsPerThread);
            java.util.List<Thread> submitters = new java.util.ArrayList<>();
            for (int t = 0; t < threads; t++) {
                submitters.add(Thread.ofPlatform().start(() -> {
                    for (int i = 0; i < jobsPerThread; i++) {
                        AtomicBoolean ranOnce = new AtomicBoolean();
                        capped.submit(1000, ctx -> {
                            if (ranOnce.compareAndSet(false, true)) {
                                throw new io.gpupool.memory.OutOfDeviceMemoryException(1000, "injected");
                            }
                            java.util.concurrent.locks.LockSupport.parkNanos(200_000);
                            return "ok";
                        }).subscribe(ok -> {
                            answered.incrementAndGet();
                            allAnswered.countDown();
                        }, failure -> allAnswered.countDown());
                    }
                }));
            }
            for (Thread submitter : submitters) {
                submitter.join();
            }
            assertThat(allAnswered.await(60, TimeUnit.SECONDS)).as("every job answered; admission: %d running, "
                    + "%d bytes admitted, %d waiting", admission.running(), admission.admittedBytes(),
                    admission.waiting()).isTrue();
            assertThat(answered.get()).as("each succeeds when run alone").isEqualTo(threads * jobsPerThread);
            waitFor(() -> admission.running() == 0);
            assertThat(admission.admittedBytes()).isZero();
            assertThat(admission.waiting()).isZero();
            assertThat(capped.submit(1000, ctx -> "after").block(Duration.ofSeconds(5))).isEqualTo("after");
        }
    }
}
