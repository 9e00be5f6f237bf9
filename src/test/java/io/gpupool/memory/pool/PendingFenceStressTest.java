package io.gpupool.memory.pool;

import io.gpupool.memory.AllocationStream;
import io.gpupool.memory.DeviceBlock;
import io.gpupool.memory.PoolConfig;
import io.gpupool.memory.PoolTuning;
import io.gpupool.memory.StreamFence;
import io.gpupool.memory.metric.AllocatorMode;
import org.junit.jupiter.api.Test;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.ConcurrentSkipListMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;

import static io.gpupool.memory.PoolConfig.GIB;
import static io.gpupool.memory.PoolConfig.MIB;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * Eight streams on the default pool (MAPPED growth) whose fences finish only a while after the free
 * recorded them, as a GPU's do: runs of many units go back under pending fences and come back to
 * their own stream or to others, while a housekeeper trims (which waits for fences) and maintains.
 * Nothing may be handed out twice, nothing may hang, and every fence the pool asked for must be
 * closed exactly once by the time the pool is closed (a leaked fence is a leaked driver event).
 */
class PendingFenceStressTest {

    private static final int STREAMS = 8;
    private static final int OPERATIONS = 3_000;

    /** Fences of all streams: recorded, closed, closed more than once. */
    private final AtomicInteger recorded = new AtomicInteger();
    private final AtomicInteger closed = new AtomicInteger();
    private final AtomicInteger closedTwice = new AtomicInteger();

    private final class LaggingFence implements StreamFence {
        private final long dueNanos;
        private final AtomicBoolean isClosed = new AtomicBoolean();

        LaggingFence(long lagNanos) {
            this.dueNanos = System.nanoTime() + lagNanos;
        }

        @Override
        public boolean isComplete() {
            assertOpen();
            return System.nanoTime() >= dueNanos;
        }

        @Override
        public void makeWait(AllocationStream waiter) {
            assertOpen();
        }

        @Override
        public void await() {
            assertOpen();
            while (System.nanoTime() < dueNanos) {
                Thread.onSpinWait();
            }
        }

        @Override
        public void close() {
            if (isClosed.compareAndSet(false, true)) {
                closed.incrementAndGet();
            } else {
                closedTwice.incrementAndGet();
            }
        }

        private void assertOpen() {
            if (isClosed.get()) {
                throw new IllegalStateException("a closed fence was used");
            }
        }
    }

    private final class LaggingStream implements AllocationStream {
        private final int ordinal;
        private final SplittableRandom random;

        LaggingStream(int ordinal) {
            this.ordinal = ordinal;
            this.random = new SplittableRandom(100 + ordinal);
        }

        @Override
        public int ordinal() {
            return ordinal;
        }

        @Override
        public StreamFence recordFence() {
            recorded.incrementAndGet();
            long lag;
            synchronized (random) {
                lag = random.nextLong(TimeUnit.MICROSECONDS.toNanos(300));
            }
            return new LaggingFence(lag);
        }
    }

    @Test
    void streamsTakingRunsBackUnderPendingFencesNeverShareMemoryAndCloseEveryFence() throws Exception {
        run(AllocatorMode.TWO_LEVEL, false);
        run(AllocatorMode.GLOBAL_ONLY, false);
    }

    /** Fences recorded on demand, by whichever thread takes the memory, while the freeing stream goes on. */
    @Test
    void lazyFencesRecordedByTheTakingThreadAreSafeAndClosedToo() throws Exception {
        run(AllocatorMode.TWO_LEVEL, true);
        run(AllocatorMode.GLOBAL_ONLY, true);
    }

    private void run(AllocatorMode mode, boolean lazyFences) throws Exception {
        recorded.set(0);
        closed.set(0);
        closedTwice.set(0);
        FakeChunkSource source = new FakeChunkSource(64 * GIB, true);
        PoolConfig config = PoolConfig.defaults().withMode(mode)
                .apply(PoolTuning.builder().localCacheCountPerClass(4).releaseIdleAge(Duration.ZERO).build())
                .withLazyFences(lazyFences);
        DevicePool pool = new DevicePool(source, config);
        ConcurrentSkipListMap<Long, Long> liveRanges = new ConcurrentSkipListMap<>();
        ConcurrentLinkedQueue<DeviceBlock> handOver = new ConcurrentLinkedQueue<>();
        List<Throwable> failures = new CopyOnWriteArrayList<>();
        List<DeviceBlock> leftovers = new CopyOnWriteArrayList<>();
        CyclicBarrier start = new CyclicBarrier(STREAMS + 1);
        AtomicBoolean running = new AtomicBoolean(true);
        List<Thread> threads = new ArrayList<>();
        for (int t = 0; t < STREAMS; t++) {
            LaggingStream stream = new LaggingStream(t);
            SplittableRandom random = new SplittableRandom(7 + t);
            threads.add(Thread.ofPlatform().name("lagging-stream-" + t).start(() -> {
                List<DeviceBlock> mine = new ArrayList<>();
                try {
                    start.await();
                    for (int i = 0; i < OPERATIONS; i++) {
                        int dice = random.nextInt(100);
                        if (mine.isEmpty() || (dice < 50 && mine.size() < 12)) {
                            long bytes = random.nextInt(4) == 0 ? 1 + random.nextLong(64 * 1024)
                                    : (1 + random.nextInt(48)) * MIB - random.nextInt(1024);
                            DeviceBlock block = pool.allocate(bytes, stream);
                            claim(liveRanges, block);
                            mine.add(block);
                        } else if (dice < 94) {
                            DeviceBlock block = mine.remove(random.nextInt(mine.size()));
                            liveRanges.remove(block.address());
                            block.release();
                        } else {
                            DeviceBlock block = mine.remove(random.nextInt(mine.size()));
                            handOver.add(block);                     // released by another stream's thread
                            DeviceBlock foreign = handOver.poll();
                            if (foreign != null) {
                                liveRanges.remove(foreign.address());
                                foreign.release();
                            }
                        }
                    }
                } catch (Throwable e) {
                    failures.add(e);
                }
                leftovers.addAll(mine);
            }));
        }
        Thread housekeeper = Thread.ofPlatform().name("housekeeper").start(() -> {
            try {
                start.await();
                while (running.get()) {
                    pool.maintain();
                    Thread.sleep(3);
                    pool.metrics().snapshot();
                    pool.trim();
                    Thread.sleep(3);
                }
            } catch (Throwable e) {
                failures.add(e);
            }
        });
        for (Thread thread : threads) {
            thread.join(TimeUnit.SECONDS.toMillis(60));
            assertThat(thread.isAlive()).as(thread.getName() + " finished").isFalse();
        }
        running.set(false);
        housekeeper.join(TimeUnit.SECONDS.toMillis(10));
        assertThat(failures).isEmpty();
        leftovers.addAll(handOver);
        PoolInvariants.liveBlocksAreSound(leftovers, source);
        leftovers.forEach(DeviceBlock::release);
        pool.close();
        if (!lazyFences) {
            assertThat(recorded.get()).as(mode + ": fences recorded").isGreaterThan(STREAMS * OPERATIONS / 10);
        }
        assertThat(closedTwice.get()).as(mode + ": fences closed twice").isZero();
        assertThat(closed.get()).as(mode + ": fences closed by the time the pool closed").isEqualTo(recorded.get());
        assertThat(source.liveChunks()).isZero();
    }

    private static void claim(ConcurrentSkipListMap<Long, Long> ranges, DeviceBlock block) {
        long start = block.address();
        long end = start + block.size();
        var below = ranges.floorEntry(end - 1);
        if (below != null && below.getValue() > start) {
            throw new AssertionError("block [" + Long.toHexString(start) + ", " + Long.toHexString(end)
                    + ") overlaps a live block at " + Long.toHexString(below.getKey()));
        }
        if (ranges.putIfAbsent(start, end) != null) {
            throw new AssertionError("block at " + Long.toHexString(start) + " handed out twice");
        }
    }
}
