package io.gpupool.memory.pool;

import io.gpupool.memory.metric.AllocatorMode;
import io.gpupool.memory.DeviceBlock;
import io.gpupool.memory.PoolConfig;
import io.gpupool.memory.PoolTuning;

import org.junit.jupiter.api.Test;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.ConcurrentSkipListMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.atomic.AtomicBoolean;

import static io.gpupool.memory.PoolConfig.GIB;
import static io.gpupool.memory.PoolConfig.MIB;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * Sixteen threads, each driving its own stream, allocate and release at random while a housekeeper
 * trims and maintains; some blocks are released by another thread than the one that allocated them.
 * Every allocation is checked at once against all live ranges, so a block handed out twice (or
 * overlapping a live one) fails the test.
 */
class DevicePoolStressTest {

    private static final int STREAMS = 16;
    private static final int OPERATIONS = 6_000;

    @Test
    void sixteenStreamsNeverShareLiveMemory() throws Exception {
        run(AllocatorMode.TWO_LEVEL);
    }

    @Test
    void sixteenStreamsOnTheGlobalLevelAlone() throws Exception {
        run(AllocatorMode.GLOBAL_ONLY);
    }

    private void run(AllocatorMode mode) throws Exception {
        FakeChunkSource source = new FakeChunkSource(64 * GIB);
        PoolConfig config = PoolConfig.defaults().withBlocks(2 * MIB, 64 * MIB).withMode(mode)
                .apply(PoolTuning.builder().localCacheCountPerClass(8).localIdleAge(Duration.ZERO)
                        .releaseIdleAge(Duration.ZERO).build());
        DevicePool pool = new DevicePool(source, config);
        ConcurrentSkipListMap<Long, Long> liveRanges = new ConcurrentSkipListMap<>();
        ConcurrentLinkedQueue<DeviceBlock> handOver = new ConcurrentLinkedQueue<>();
        List<Throwable> failures = new CopyOnWriteArrayList<>();
        List<List<DeviceBlock>> leftovers = new CopyOnWriteArrayList<>();
        CyclicBarrier start = new CyclicBarrier(STREAMS + 1);
        AtomicBoolean running = new AtomicBoolean(true);

        List<Thread> threads = new ArrayList<>();
        for (int t = 0; t < STREAMS; t++) {
            TestStream stream = new TestStream(t);
            long seed = 42 + t;
            threads.add(Thread.ofPlatform().name("stream-" + t).start(() -> {
                SplittableRandom random = new SplittableRandom(seed);
                List<DeviceBlock> mine = new ArrayList<>();
                try {
                    start.await();
                    for (int i = 0; i < OPERATIONS; i++) {
                        int dice = random.nextInt(100);
                        if (mine.isEmpty() || (dice < 55 && mine.size() < 40)) {
                            DeviceBlock block = pool.allocate(size(random), stream);
                            claim(liveRanges, block);
                            mine.add(block);
                        } else if (dice < 95) {
                            DeviceBlock block = mine.remove(random.nextInt(mine.size()));
                            unclaim(liveRanges, block);
                            block.release();
                        } else {
                            DeviceBlock block = mine.remove(random.nextInt(mine.size()));
                            handOver.add(block);                     // released by another thread
                            DeviceBlock foreign = handOver.poll();
                            if (foreign != null) {
                                unclaim(liveRanges, foreign);
                                foreign.release();
                            }
                        }
                    }
                } catch (Throwable e) {
                    failures.add(e);
                }
                leftovers.add(mine);
            }));
        }
        Thread housekeeper = Thread.ofPlatform().name("housekeeper").start(() -> {
            try {
                start.await();
                while (running.get()) {
                    pool.maintain();
                    Thread.sleep(2);
                    pool.metrics().snapshot();
                    pool.trim();
                    Thread.sleep(2);
                }
            } catch (Throwable e) {
                failures.add(e);
            }
        });
        for (Thread thread : threads) {
            thread.join();
        }
        running.set(false);
        housekeeper.join();
        assertThat(failures).isEmpty();

        List<DeviceBlock> live = new ArrayList<>();
        leftovers.forEach(live::addAll);
        live.addAll(handOver);
        PoolInvariants.liveBlocksAreSound(live, source);
        PoolInvariants.accountingHolds(pool, live, source);
        assertThat(pool.metrics().counters().allocations()).isGreaterThan(STREAMS * OPERATIONS / 2);
        live.forEach(DeviceBlock::release);
        PoolInvariants.accountingHolds(pool, List.of(), source);
        PoolInvariants.freeSpaceIsWholeChunks(pool);
        pool.close();
        assertThat(source.liveChunks()).isZero();
    }

    private static long size(SplittableRandom random) {
        int dice = random.nextInt(100);
        if (dice < 50) {
            return 1 + random.nextLong(64 * 1024);              // small objects
        }
        if (dice < 97) {
            return 1 + random.nextLong(24 * MIB);               // buddy runs
        }
        return 64 * MIB + 1 + random.nextLong(64 * MIB);         // dedicated chunks
    }

    private static void claim(ConcurrentSkipListMap<Long, Long> ranges, DeviceBlock block) {
        long start = block.address();
        long end = start + block.size();
        Long previous = ranges.putIfAbsent(start, end);
        assertThat(previous).as("%s handed out twice", block).isNull();
        Map.Entry<Long, Long> lower = ranges.lowerEntry(start);
        Map.Entry<Long, Long> higher = ranges.higherEntry(start);
        assertThat(lower == null || lower.getValue() <= start).as("%s overlaps [%s)", block, lower).isTrue();
        assertThat(higher == null || higher.getKey() >= end).as("%s overlaps [%s)", block, higher).isTrue();
    }

    private static void unclaim(ConcurrentSkipListMap<Long, Long> ranges, DeviceBlock block) {
        assertThat(ranges.remove(block.address())).isNotNull();
    }
}
