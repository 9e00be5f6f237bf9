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
}
