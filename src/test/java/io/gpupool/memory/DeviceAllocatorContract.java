package io.gpupool.memory;

import io.gpupool.replay.SimulatedChunkSource;
import io.gpupool.replay.StatisticsChunkSource;
import io.gpupool.replay.ReplayStream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.ConcurrentSkipListMap;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * What every {@link DeviceAllocator} built over a {@link ChunkSource} must do. Each strategy extends
 * this class with one method, {@link #createAllocator(ChunkSource)}.
 *
 * <p>The allocator runs over a simulated device ({@link SimulatedChunkSource}, no memory behind
 * it) wrapped in a {@link StatisticsChunkSource}, so the tests can see exactly what the allocator
 * holds from its source.
 */
public abstract class DeviceAllocatorContract {

    protected static final long KIB = 1L << 10;
    protected static final long MIB = 1L << 20;
    protected static final long GIB = 1L << 30;

    /** A fresh allocator over {@code source}. */
    protected abstract DeviceAllocator createAllocator(ChunkSource source);

    /** The largest block the strategy serves without a dedicated chunk (256 MiB by default). */
    protected long maxBlockBytes() {
        return 256 * MIB;
    }

    protected final AllocationStream stream0 = new ReplayStream(0);
    protected final AllocationStream stream1 = new ReplayStream(1);
    protected StatisticsChunkSource source;
    protected DeviceAllocator allocator;
    private boolean closed;

    @BeforeEach
    void createTheAllocator() {
        source = new StatisticsChunkSource(new SimulatedChunkSource("contract", 64 * GIB));
        allocator = createAllocator(source);
    }

    @AfterEach
    void closeTheAllocator() {
        if (!closed) {
            allocator.close();
        }
        assertEquals(0, source.reservedBytes(), "after close every chunk must be back at the source");
    }

    private void close() {
        closed = true;
        allocator.close();
    }

    @Test
    void servesSizesFromOneByteToBeyondTheLargestBlock() {
        long max = maxBlockBytes();
        long[] sizes = {1, 255, 256, 257, 4 * KIB + 1, MIB + 1, 2 * MIB, 3 * MIB, 10 * MIB, 100 * MIB, max, max + 1,
                2 * max + 12345};
        List<DeviceBlock> blocks = new ArrayList<>();
        for (long size : sizes) {
            DeviceBlock block = allocator.allocate(size, stream0);
            assertEquals(size, block.requestedBytes());
            assertTrue(block.size() >= size, "block of " + block.size() + " bytes for a request of " + size);
            assertEquals(0, block.address() % 256, "block " + block + " is not 256-byte aligned");
            assertSame(stream0, block.stream());
            assertEquals(1, block.refCount());
            blocks.add(block);
        }
        assertNoOverlap(blocks);
        assertTrue(source.reservedBytes() >= sum(sizes), "reserved " + source.reservedBytes()
                + " is less than what is live");
        blocks.forEach(DeviceBlock::release);
    }

    @Test
    void rejectsNonPositiveSizes() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> allocator.allocate(0, stream0));
        assertTrue(e.getMessage().contains("0"), e.getMessage());
        assertThrows(IllegalArgumentException.class, () -> allocator.allocate(-1, stream0));
    }

    @Test
    void freedMemoryIsReusedNotReservedAgain() {
        DeviceBlock first = allocator.allocate(3 * MIB, stream0);
        first.release();
        long reserved = source.reservedBytes();
        for (int i = 0; i < 1000; i++) {
            allocator.allocate(3 * MIB, stream0).release();
            allocator.allocate(1000, stream0).release();
        }
        assertTrue(source.reservedBytes() <= Math.max(reserved, 2 * (3 * MIB + 2 * MIB)),
                "reserved grew from " + reserved + " to " + source.reservedBytes() + " in an alloc/free loop");
    }

    @Test
    void aRetainedBlockStaysAllocatedUntilTheLastRelease() {
        DeviceBlock block = allocator.allocate(MIB, stream0);
        assertSame(block, block.retain());
        assertEquals(2, block.refCount());
        assertFalse(block.release(), "first of two releases must not free the block");
        List<DeviceBlock> others = new ArrayList<>();
        for (int i = 0; i < 8; i++) {
            others.add(allocator.allocate(MIB, stream0));
        }
        others.add(block);
        assertNoOverlap(others); // the retained block was not handed out again
        assertTrue(block.release(), "the last release frees the block");
        assertEquals(0, block.refCount());
        others.remove(block);
        others.forEach(DeviceBlock::release);
    }

    @Test
    void aDoubleReleaseIsAnErrorNamingTheBlock() {
        DeviceBlock block = allocator.allocate(4 * KIB, stream0);
        block.release();
        IllegalStateException e = assertThrows(IllegalStateException.class, block::release);
        assertTrue(e.getMessage().contains(Long.toHexString(block.address())), e.getMessage());
        assertThrows(IllegalStateException.class, block::retain);
    }

    @Test
    void outOfMemoryIsReportedAndTheAllocatorKeepsWorking() {
        close();
        source = new StatisticsChunkSource(new SimulatedChunkSource("small", 512 * MIB));
        allocator = createAllocator(source);
        closed = false;
        DeviceBlock small = allocator.allocate(MIB, stream0);
        OutOfDeviceMemoryException e = assertThrows(OutOfDeviceMemoryException.class,
                () -> allocator.allocate(GIB, stream0));
        assertEquals(GIB, e.requestedBytes());
        assertNotNull(e.getMessage());
        DeviceBlock after = allocator.allocate(2 * MIB, stream1);
        assertTrue(source.reservedBytes() <= 512 * MIB);
        small.release();
        after.release();
    }

    @Test
    void closeReturnsEverythingAndNamesOutstandingBlocks() {
        allocator.allocate(MIB, stream0).release();
        DeviceBlock leaked = allocator.allocate(777_777, stream1);
        RuntimeException e = assertThrows(RuntimeException.class, this::close);
        assertTrue(e.getMessage().contains("777777") || e.getMessage().contains(Long.toString(leaked.size())),
                "message should name the outstanding block's size: " + e.getMessage());
        assertEquals(0, source.reservedBytes(), "close must return every chunk even with blocks outstanding");
        assertEquals(1, leaked.refCount());
    }

    @Test
    void concurrentStreamsNeverReceiveOverlappingBlocks() throws Exception {
        int threads = 8;
        ConcurrentSkipListMap<Long, Long> live = new ConcurrentSkipListMap<>();
        CyclicBarrier barrier = new CyclicBarrier(threads);
        ExecutorService pool = Executors.newFixedThreadPool(threads);
        try {
            List<Future<?>> futures = new ArrayList<>();
            for (int t = 0; t < threads; t++) {
                AllocationStream stream = new ReplayStream(t);
                long seed = t;
                futures.add(pool.submit(() -> {
                    SplittableRandom random = new SplittableRandom(seed);
                    List<DeviceBlock> mine = new ArrayList<>();
                    barrier.await();
                    for (int op = 0; op < 2000; op++) {
                        if (mine.isEmpty() || (mine.size() < 32 && random.nextBoolean())) {
                            long size = random.nextInt(4) == 0 ? 1 + random.nextLong(8 * MIB) : 1 + random.nextLong(64 * KIB);
                            DeviceBlock block = allocator.allocate(size, stream);
                            claim(live, block);
                            mine.add(block);
                        } else {
                            DeviceBlock block = mine.remove(random.nextInt(mine.size()));
                            live.remove(block.address());
                            block.release();
                        }
                    }
                    for (DeviceBlock block : mine) {
                        live.remove(block.address());
                        block.release();
                    }
                    return null;
                }));
            }
            for (Future<?> f : futures) {
                f.get();
            }
        } finally {
            pool.shutdownNow();
        }
        assertTrue(live.isEmpty());
    }

    /** Inserts the block into the live map, failing if it overlaps a neighbour already there. */
    private static void claim(ConcurrentSkipListMap<Long, Long> live, DeviceBlock block) {
        long start = block.address();
        long end = start + block.size();
        Long previous = live.putIfAbsent(start, end);
        if (previous != null) {
            throw new AssertionError("address 0x" + Long.toHexString(start) + " handed out twice");
        }
        Map.Entry<Long, Long> lower = live.lowerEntry(start);
        Map.Entry<Long, Long> higher = live.higherEntry(start);
        if ((lower != null && lower.getValue() > start) || (higher != null && higher.getKey() < end)) {
            throw new AssertionError("block " + block + " overlaps a live block");
        }
    }

    private static long sum(long[] values) {
        long total = 0;
        for (long v : values) {
            total += v;
        }
        return total;
    }

    protected static void assertNoOverlap(List<DeviceBlock> blocks) {
        List<DeviceBlock> sorted = new ArrayList<>(blocks);
        sorted.sort((a, b) -> Long.compare(a.address(), b.address()));
        for (int i = 1; i < sorted.size(); i++) {
            DeviceBlock prev = sorted.get(i - 1);
            DeviceBlock cur = sorted.get(i);
            assertTrue(prev.address() + prev.size() <= cur.address(), prev + " overlaps " + cur);
        }
    }
}
