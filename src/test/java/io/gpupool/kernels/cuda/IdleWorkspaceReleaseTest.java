package io.gpupool.kernels.cuda;

import io.gpupool.config.IdleWorkspaceRelease;
import io.gpupool.kernels.StreamWorkspaces;
import io.gpupool.kernels.TensorOps.Activation;
import io.gpupool.kernels.cuda.CudaTensorOpsLaunchTest.RecordingDevice;
import io.gpupool.kernels.cuda.CudaTensorOpsLibraryTest.RecordingLibrary;
import io.gpupool.memory.AllocationStream;
import io.gpupool.memory.DeviceAllocator;
import io.gpupool.memory.DeviceBlock;
import io.gpupool.memory.PoolConfig;
import io.gpupool.memory.metric.AllocatorMetrics;
import io.gpupool.memory.metric.AllocatorMode;
import io.gpupool.memory.pool.DevicePool;
import io.gpupool.replay.SimulatedChunkSource;
import io.gpupool.serving.DeviceWorker;
import io.gpupool.serving.fake.CountingAllocator;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import reactor.core.publisher.Mono;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * A device's stream workspaces on a serving stream set, without a GPU (fake library, real pool over simulated
 * chunks): requests on three streams leave three workspaces in the pool; releasing the idle streams gives them
 * back (the pool's allocated bytes return to 0) while a stream running a request keeps its own; the next request
 * works and takes one again, also when it arrived while the release held the stream; {@link IdleWorkspaceRelease}
 * does this by itself once the device was idle long enough.
 */
class IdleWorkspaceReleaseTest {

    private final RecordingDevice device = new RecordingDevice();
    private final RecordingLibrary library = new RecordingLibrary();
    private final DevicePool pool = new DevicePool(new SimulatedChunkSource("test", 1L << 34), PoolConfig.defaults());
    private final CudaTensorOps ops = new CudaTensorOps(device, Precision.BF16, library, pool);
    private final StreamWorkspaces workspaces = ops.workspaces().orElseThrow();
    private final DeviceWorker worker = new DeviceWorker(device, pool, ops, 3, 8);
    private final long one = library.workspaceBytes();

    @AfterEach
    void closeAll() {
        worker.close();
        ops.close();
        assertThat(pool.metrics().allocatedBytes()).isZero();
        pool.close();
    }

    /** A request doing one product on its stream, then waiting for {@code gate}. */
    private Mono<Void> request(CountDownLatch started, CountDownLatch gate) {
        return worker.submit(context -> {
            context.ops().linear(context.stream(), 0x1000, 0x2000, 0x3000, 0x4000, 64, 768, 768, Activation.NONE);
            started.countDown();
            await(gate);
            return null;
        });
    }

    private static void await(CountDownLatch latch) {
        try {
            assertThat(latch.await(10, TimeUnit.SECONDS)).as("latch released in time").isTrue();
        } catch (InterruptedException e) {
            throw new AssertionError(e);
        }
    }

    /**
     * Runs three requests at once, so that each holds its own stream, and waits for them.
     *
     * @return System.nanoTime() before the requests were let finish (no later than the device's last activity)
     */
    private long loadAllThreeStreams() {
        CountDownLatch started = new CountDownLatch(3);
        CountDownLatch gate = new CountDownLatch(1);
        List<Mono<Void>> running = new ArrayList<>();
        List<Throwable> failed = new CopyOnWriteArrayList<>();
        long letFinish;
        try {
            for (int i = 0; i < 3; i++) {
                running.add(request(started, gate).cache());
                running.getLast().subscribe(done -> { }, failed::add);
            }
            assertThat(started.await(10, TimeUnit.SECONDS)).as("three requests running at once; failed: %s", failed)
                    .isTrue();
        } catch (InterruptedException e) {
            throw new AssertionError(e);
        } finally {
            letFinish = System.nanoTime();
            gate.countDown();
        }
        running.forEach(Mono::block);
        return letFinish;
    }

    @Test
    void idleStreamsGiveTheirWorkspacesBackAndABusyStreamKeepsItsOwn() {
        loadAllThreeStreams();
        assertThat(pool.metrics().allocatedBytes()).isEqualTo(3 * one);

        CountDownLatch started = new CountDownLatch(1);
        CountDownLatch gate = new CountDownLatch(1);
        Mono<Void> busy = request(started, gate).cache();
        busy.subscribe();
        await(started);
        assertThat(worker.idleNanos()).as("a request runs").isZero();
        assertThat(worker.releaseIdleWorkspaces()).isEqualTo(2 * one);
        assertThat(pool.metrics().allocatedBytes()).as("the busy stream's workspace").isEqualTo(one);

        gate.countDown();
        busy.block();
        assertThat(worker.releaseIdleWorkspaces()).isEqualTo(one);
        assertThat(pool.metrics().allocatedBytes()).as("the pool drained").isZero();
        assertThat(workspaces.streams()).isZero();

        CountDownLatch open = new CountDownLatch(0);
        request(new CountDownLatch(1), open).block();
        assertThat(pool.metrics().allocatedBytes()).as("the next request took one again").isEqualTo(one);
        assertThat(worker.inFlight()).isZero();
    }

    /**
     * A request that arrives while a release holds the device's only stream waits in the queue and runs as soon as
     * the stream is handed on, taking a workspace again; nothing is refused and no lease is lost.
     */
    @Test
    void aRequestArrivingDuringAReleaseWaitsForTheStreamAndRuns() throws Exception {
        CountDownLatch freeing = new CountDownLatch(1);
        CountDownLatch letFree = new CountDownLatch(1);
        CountingAllocator counting = new CountingAllocator(1L << 30);
        DeviceAllocator slowFree = new DeviceAllocator() {
            @Override
            public DeviceBlock allocate(long bytes, AllocationStream stream) {
                DeviceBlock inner = counting.allocate(bytes, stream);
                return new DeviceBlock(block -> {
                    freeing.countDown();
                    await(letFree);
                    inner.release();
                }, inner.address(), inner.size(), bytes, stream, 0, null);
            }

            @Override public AllocatorMode mode() { return counting.mode(); }
            @Override public AllocatorMetrics metrics() { return counting.metrics(); }
            @Override public void close() { }
        };
        CudaTensorOps slowOps = new CudaTensorOps(device, Precision.BF16, library, slowFree);
        DeviceWorker single = new DeviceWorker(device, slowFree, slowOps, 1, 4);
        try {
            Mono<Void> first = single.submit(context -> {
                context.ops().linear(context.stream(), 0x1000, 0x2000, 0x3000, 0x4000, 8, 64, 64, Activation.NONE);
                return null;
            });
            first.block();
            CompletableFuture<Long> release = CompletableFuture.supplyAsync(single::releaseIdleWorkspaces);
            await(freeing);                                     // the release holds the only stream now
            CompletableFuture<Void> second = single.<Void>submit(context -> {
                context.ops().linear(context.stream(), 0x1000, 0x2000, 0x3000, 0x4000, 8, 64, 64, Activation.NONE);
                return null;
            }).toFuture();
            Thread.sleep(50);
            assertThat(single.queueDepth()).as("the request waits for the stream").isEqualTo(1);
            assertThat(second).isNotDone();
            letFree.countDown();
            assertThat(release.get(10, TimeUnit.SECONDS)).isEqualTo(one);
            second.get(10, TimeUnit.SECONDS);
            assertThat(single.queueDepth()).isZero();
            assertThat(single.inFlight()).isZero();
            assertThat(counting.allocatedBytes.get()).as("the second request took a workspace again").isEqualTo(one);
            assertThat(single.releaseIdleWorkspaces()).isEqualTo(one);
            assertThat(counting.allocatedBytes.get()).isZero();
        } finally {
            letFree.countDown();
            single.close();
            slowOps.close();
        }
    }

    @Test
    void aDeviceIdleLongEnoughIsReleasedByItselfAndNotBefore() throws InterruptedException {
        try (IdleWorkspaceRelease release = new IdleWorkspaceRelease(List.of(worker), Duration.ofMillis(200))) {
            long finished = loadAllThreeStreams();
            while (pool.metrics().allocatedBytes() > 0 && System.nanoTime() - finished < TimeUnit.SECONDS.toNanos(10)) {
                Thread.sleep(10);
            }
            assertThat(pool.metrics().allocatedBytes()).isZero();
            assertThat(System.nanoTime() - finished).as("not before the idle period")
                    .isGreaterThanOrEqualTo(TimeUnit.MILLISECONDS.toNanos(200));
            assertThat(workspaces.releases()).isEqualTo(3);
        }
    }

    @Test
    void withoutAnIdlePeriodTheWorkspacesStayUntilATrimOrClose() throws InterruptedException {
        try (IdleWorkspaceRelease release = new IdleWorkspaceRelease(List.of(worker), Duration.ZERO)) {
            loadAllThreeStreams();
            Thread.sleep(100);
            assertThat(pool.metrics().allocatedBytes()).isEqualTo(3 * one);
        }
        assertThatThrownBy(() -> new IdleWorkspaceRelease(List.of(worker), Duration.ofSeconds(-1)))
                .hasMessageContaining("gpupool.kernels.workspace-release-after-idle = PT-1S");
    }
}
