package io.gpupool.memory;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * What every {@link ChunkSource} must do. Each backend (and each decorator) extends this class with
 * one method, {@link #createSource()}; the CUDA subclass is tagged {@code gpu}.
 *
 * <p>Chunks are 2 MiB (the pool's granule) unless {@link #chunkBytes()} is overridden; at most 16
 * are live at once, so a source needs about 32 MiB of memory to pass.
 */
public abstract class ChunkSourceContract {

    protected static final long MIB = 1L << 20;

    /** A fresh source; closed or dropped after each test. */
    protected abstract ChunkSource createSource();

    /**
     * Releases what {@link #createSource()} opened, after the test's chunks were freed. The default
     * closes the source if it is {@link AutoCloseable}; a backend test closes its backend here.
     */
    protected void destroySource(ChunkSource source) throws Exception {
        if (source instanceof AutoCloseable closeable) {
            closeable.close();
        }
    }

    /** Size of the chunks the tests allocate: a multiple of 2 MiB. */
    protected long chunkBytes() {
        return 2 * MIB;
    }

    private ChunkSource source;
    private final List<long[]> live = Collections.synchronizedList(new ArrayList<>());

    @BeforeEach
    void createTheSource() {
        source = createSource();
    }

    @AfterEach
    void freeWhatIsLeft() throws Exception {
        if (source == null) {
            return;
        }
        try {
            for (long[] chunk : live) {
                source.free(chunk[0], chunk[1]);
            }
            live.clear();
        } finally {
            destroySource(source);
        }
    }

    private long allocate(long bytes) {
        long address = source.allocate(bytes);
        live.add(new long[]{address, bytes});
        return address;
    }

    private void free(long address, long bytes) {
        live.removeIf(c -> c[0] == address);
        source.free(address, bytes);
    }

    @Test
    void reportsPositiveCapacityAndANonBlankName() {
        assertTrue(source.capacityBytes() > 0, "capacityBytes() = " + source.capacityBytes());
        assertFalse(source.name() == null || source.name().isBlank(), "name() must not be blank");
    }

    @Test
    void chunksAreAtLeast256ByteAligned() {
        for (int i = 0; i < 4; i++) {
            long address = allocate(chunkBytes());
            assertEquals(0, address % 256, "chunk at 0x" + Long.toHexString(address) + " is not 256-byte aligned");
        }
    }

    @Test
    void liveChunksAreDistinctAndDoNotOverlap() {
        List<long[]> chunks = new ArrayList<>();
        for (int i = 0; i < 8; i++) {
            long bytes = chunkBytes() * (1 + i % 2);
            chunks.add(new long[]{allocate(bytes), bytes});
        }
        assertNoOverlap(chunks);
    }

    @Test
    void freedMemoryCanBeAllocatedAgain() {
        // 64 rounds of 4 chunks: a source that leaked on free would run out long before a device does
        for (int round = 0; round < 64; round++) {
            long[] addresses = new long[4];
            for (int i = 0; i < addresses.length; i++) {
                addresses[i] = allocate(chunkBytes());
            }
            for (long address : addresses) {
                free(address, chunkBytes());
            }
        }
        long again = allocate(chunkBytes());
        assertEquals(0, again % 256);
    }

    @Test
    void refusesAnAbsurdSizeWithOutOfDeviceMemory() {
        long absurd = (Long.MAX_VALUE / 4) & -(2 * MIB);
        OutOfDeviceMemoryException e = assertThrows(OutOfDeviceMemoryException.class, () -> allocate(absurd));
        assertEquals(absurd, e.requestedBytes());
        long aboveCapacity = ((source.capacityBytes() * 2) + 2 * MIB) & -(2 * MIB);
        assertThrows(OutOfDeviceMemoryException.class, () -> allocate(aboveCapacity));
        // and the source still works afterwards
        allocate(chunkBytes());
    }

    @Test
    void rejectsNonPositiveSizes() {
        assertThrows(IllegalArgumentException.class, () -> allocate(0));
        assertThrows(IllegalArgumentException.class, () -> allocate(-2 * MIB));
    }

    @Test
    void isSafeToUseFromSeveralThreads() throws Exception {
        int threads = 4;
        CyclicBarrier barrier = new CyclicBarrier(threads);
        List<long[]> all = Collections.synchronizedList(new ArrayList<>());
        ExecutorService pool = Executors.newFixedThreadPool(threads);
        try {
            List<Future<?>> futures = new ArrayList<>();
            for (int t = 0; t < threads; t++) {
                futures.add(pool.submit(() -> {
                    barrier.await();
                    for (int round = 0; round < 16; round++) {
                        long a = source.allocate(chunkBytes());
                        long b = source.allocate(chunkBytes());
                        source.free(a, chunkBytes());
                        source.free(b, chunkBytes());
                    }
                    for (int i = 0; i < 3; i++) {
                        long address = allocate(chunkBytes());
                        all.add(new long[]{address, chunkBytes()});
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
        assertEquals(threads * 3, all.size());
        assertNoOverlap(all);
    }

    private static void assertNoOverlap(List<long[]> chunks) {
        List<long[]> sorted = new ArrayList<>(chunks);
        sorted.sort((a, b) -> Long.compareUnsigned(a[0], b[0]));
        for (int i = 1; i < sorted.size(); i++) {
            long[] prev = sorted.get(i - 1);
            long[] cur = sorted.get(i);
            assertTrue(Long.compareUnsigned(prev[0] + prev[1], cur[0]) <= 0, "chunk 0x" + Long.toHexString(prev[0])
                    + " (" + prev[1] + " bytes) overlaps chunk 0x" + Long.toHexString(cur[0]));
        }
    }
}
