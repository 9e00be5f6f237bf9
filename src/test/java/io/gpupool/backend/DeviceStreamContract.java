package io.gpupool.backend;

import io.gpupool.memory.metric.AllocatorMode;
import io.gpupool.memory.ChunkSource;
import io.gpupool.memory.DeviceAllocator;
import io.gpupool.memory.DeviceBlock;
import io.gpupool.memory.pool.DevicePool;
import io.gpupool.memory.PoolConfig;
import io.gpupool.memory.OutOfDeviceMemoryException;
import io.gpupool.memory.StreamFence;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.atomic.AtomicInteger;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatCode;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * What every backend's devices and streams must do. Each backend adds a subclass that creates the
 * backend and can keep a stream busy for a while (the CUDA one is tagged {@code gpu}).
 */
public abstract class DeviceStreamContract {

    private static final long MIB = 1L << 20;

    protected ComputeBackend backend;
    protected ComputeDevice device;
    private final List<DeviceStream> streams = new ArrayList<>();
    private final Arena arena = Arena.ofShared();

    /** A fresh backend with at least one device (skip the test with an assumption if impossible). */
    protected abstract ComputeBackend createBackend();

    /** Enqueues work on {@code stream} that keeps it busy for about {@code millis} milliseconds. */
    protected abstract void occupy(DeviceStream stream, long millis);

    /** Called before the backend is closed; subclasses free what {@link #occupy} needed. */
    protected void releaseTestResources() {
    }

    @BeforeEach
    void openBackend() {
        backend = createBackend();
        device = backend.devices().getFirst();
        device.bindToCurrentThread();
    }

    @AfterEach
    void closeBackend() {
        try {
            if (backend == null) {
                return; // skipped by an assumption
            }
            for (DeviceStream stream : streams) {
                stream.close();
            }
            releaseTestResources();
            backend.close();
        } finally {
            arena.close();
        }
    }

    protected DeviceStream stream(int ordinal) {
        DeviceStream stream = device.createStream(ordinal);
        streams.add(stream);
        return stream;
    }

    private MemorySegment randomHost(long bytes, long seed) {
        MemorySegment segment = arena.allocate(bytes);
        byte[] data = new byte[(int) bytes];
        new Random(seed).nextBytes(data);
        MemorySegment.copy(MemorySegment.ofArray(data), 0, segment, 0, bytes);
        return segment;
    }

    @Test
    void deviceReportsItsMemory() {
        assertThat(backend.devices()).isNotEmpty();
        assertThat(device.totalMemory()).isPositive();
        assertThat(device.freeMemory()).isBetween(0L, device.totalMemory());
        assertThat(device.chunkSource().capacityBytes()).isPositive();
    }

    @Test
    void copiesRoundTripHostToDeviceToDeviceToHost() {
        DeviceStream stream = stream(0);
        ChunkSource source = device.chunkSource();
        long chunk = source.allocate(32 * MIB);
        try {
            assertThat(chunk % 256).as("chunk alignment").isZero();
            for (long bytes : new long[] {1, 4096 + 3, 9 * MIB + 5}) {
                MemorySegment in = randomHost(bytes, bytes);
                MemorySegment out = arena.allocate(bytes);
                stream.copyHostToDevice(in, chunk, bytes);
                stream.copyDeviceToDevice(chunk, chunk + 16 * MIB, bytes);
                stream.fill(chunk, (byte) 0, bytes); // the second copy must not depend on the first region
                stream.copyDeviceToHost(chunk + 16 * MIB, out, bytes);
                stream.synchronize();
                assertThat(out.mismatch(in)).as("first differing byte of a %d-byte round trip", bytes).isEqualTo(-1);
            }
        } finally {
            stream.synchronize();
            source.free(chunk, 32 * MIB);
        }
    }

    @Test
    void fillSetsExactlyTheGivenRange() {
        DeviceStream stream = stream(0);
        long chunk = device.chunkSource().allocate(2 * MIB);
        try {
            MemorySegment out = arena.allocate(8192);
            stream.fill(chunk, (byte) 0x11, 8192);
            stream.fill(chunk + 1000, (byte) 0x7f, 3000);
            stream.copyDeviceToHost(chunk, out, 8192);
            stream.synchronize();
            for (int i = 0; i < 8192; i++) {
                byte expected = i >= 1000 && i < 4000 ? (byte) 0x7f : (byte) 0x11;
                assertThat(out.get(java.lang.foreign.ValueLayout.JAVA_BYTE, i)).as("byte %d", i).isEqualTo(expected);
            }
        } finally {
            device.chunkSource().free(chunk, 2 * MIB);
        }
    }

    @Test
    void hostTasksRunInEnqueueOrder() {
        DeviceStream stream = stream(0);
        List<Integer> seen = new ArrayList<>();
        for (int i = 0; i < 500; i++) {
            int value = i;
            stream.enqueueHostTask(() -> seen.add(value));
        }
        stream.synchronize();
        assertThat(seen).hasSize(500);
        for (int i = 0; i < 500; i++) {
            assertThat(seen.get(i)).isEqualTo(i);
        }
    }

    @Test
    void hostTaskRunsAfterEarlierDeviceWork() {
        DeviceStream stream = stream(0);
        long chunk = device.chunkSource().allocate(2 * MIB);
        try {
            MemorySegment out = arena.allocate(4096);
            AtomicInteger observed = new AtomicInteger(-1);
            occupy(stream, 100);
            stream.fill(chunk, (byte) 42, 4096);
            stream.copyDeviceToHost(chunk, out, 4096);
            stream.enqueueHostTask(() -> observed.set(out.get(java.lang.foreign.ValueLayout.JAVA_BYTE, 4095)));
            stream.synchronize();
            assertThat(observed.get()).isEqualTo(42);
        } finally {
            device.chunkSource().free(chunk, 2 * MIB);
        }
    }

    @Test
    void synchronizeRethrowsTheFirstFailureOnceAndLaterWorkStillRuns() {
        DeviceStream stream = stream(0);
        AtomicInteger ran = new AtomicInteger();
        stream.enqueueHostTask(() -> {
            throw new IllegalStateException("first failure");
        });
        stream.enqueueHostTask(() -> {
            throw new IllegalArgumentException("second failure");
        });
        stream.enqueueHostTask(ran::incrementAndGet);
        assertThatThrownBy(stream::synchronize).isInstanceOf(IllegalStateException.class).hasMessage("first failure");
        assertThat(ran.get()).isEqualTo(1);
        stream.enqueueHostTask(ran::incrementAndGet);
        assertThatCode(stream::synchronize).doesNotThrowAnyException();
        assertThat(ran.get()).isEqualTo(2);
    }

    @Test
    void aPoolClosedAfterItsStreamsReturnsEverything() {
        // shutdown order is not guaranteed: the pool flushes the closed streams' caches, recording
        // fences on them, and must still give every chunk back
        DevicePool pool = new DevicePool(device.chunkSource(), PoolConfig.defaults());
        DeviceStream first = stream(0);
        DeviceStream second = stream(1);
        long before = device.freeMemory();
        pool.allocate(3 * MIB, first).release();
        pool.allocate(64 * 1024, second).release();
        first.close();
        second.close();
        assertThat(first.recordFence().isComplete()).isTrue();
        assertThatCode(pool::close).doesNotThrowAnyException();
        assertThat(device.freeMemory()).isGreaterThanOrEqualTo(before);
    }

    @Test
    void aLazilyFencedBlockAnotherStreamTakesIsWrittenOnlyAfterTheFreeingStreamsWork() {
        // a pool of one 4 MiB block: b must get the block a freed while a's fill is still queued behind 300 ms
        DeviceStream a = stream(0);
        DeviceStream b = stream(1);
        try (DevicePool pool = new DevicePool(device.chunkSource(), PoolConfig.defaults().withBlocks(2 * MIB, 4 * MIB)
                .withGrowth(io.gpupool.memory.GrowthPolicy.EAGER, 4 * MIB)
                .apply(io.gpupool.memory.PoolTuning.builder().capBytes(4 * MIB).build())
                .withMode(AllocatorMode.GLOBAL_ONLY).withLazyFences(true))) {
            DeviceBlock onA = pool.allocate(4 * MIB, a);
            occupy(a, 300);
            a.fill(onA.address(), (byte) 1, 4096);
            onA.release();                                     // no fence recorded yet
            DeviceBlock onB = pool.allocate(4 * MIB, b);
            assertThat(onB.address()).isEqualTo(onA.address());
            b.fill(onB.address(), (byte) 2, 4096);             // must land after a's fill
            a.synchronize();
            MemorySegment out = arena.allocate(4096);
            b.copyDeviceToHost(onB.address(), out, 4096);
            b.synchronize();
            for (int i = 0; i < 4096; i += 512) {
                assertThat(out.get(java.lang.foreign.ValueLayout.JAVA_BYTE, i)).as("byte %d", i).isEqualTo((byte) 2);
            }
            onB.release();
            b.synchronize();
        }
    }

    @Test
    void aStreamReportsASynchronisationBegunAfterAMark() {
        DeviceStream stream = stream(0);
        occupy(stream, 50);
        long mark = stream.syncMark();
        assertThat(stream.synchronizedSince(mark)).as("not synchronised since the mark").isFalse();
        stream.synchronize();
        assertThat(stream.synchronizedSince(mark)).isTrue();
        long later = stream.syncMark();
        assertThat(stream.synchronizedSince(later)).isFalse();
        stream.close();
        assertThat(stream.synchronizedSince(later)).as("a closed stream finished everything").isTrue();
    }

    @Test
    void fenceCompletesOnlyAfterEarlierWork() {
        DeviceStream stream = stream(0);
        occupy(stream, 300);
        StreamFence fence = stream.recordFence();
        assertThat(fence.isComplete()).as("fence behind 300 ms of work").isFalse();
        fence.await();
        assertThat(fence.isComplete()).isTrue();
        fence.close();
        assertThatCode(fence::close).as("close is idempotent").doesNotThrowAnyException();
    }

    @Test
    void aFenceRecordedAfterAClosedOneReportsOnlyItsOwnPoint() {
        // backends may recycle a closed fence's native event: the next fence must not inherit its state
        DeviceStream stream = stream(0);
        for (int i = 0; i < 3; i++) {
            StreamFence idle = stream.recordFence();
            idle.await();
            assertThat(idle.isComplete()).as("fence on an idle stream, round %d", i).isTrue();
            idle.close();
            occupy(stream, 200);
            StreamFence busy = stream.recordFence();
            assertThat(busy.isComplete()).as("fence behind 200 ms of work, round %d", i).isFalse();
            busy.await();
            assertThat(busy.isComplete()).isTrue();
            busy.close();
        }
    }

    @Test
    void aFenceCanBeClosedAfterItsStream() {
        // the pool drops fences when the memory is reused or returned, possibly after the stream is gone
        DeviceStream stream = stream(0);
        occupy(stream, 50);
        StreamFence fence = stream.recordFence();
        stream.close();
        assertThatCode(fence::close).doesNotThrowAnyException();
        assertThatCode(fence::close).as("close is idempotent").doesNotThrowAnyException();
    }

    @Test
    void fenceMakesAnotherStreamWaitWithoutBlockingTheCaller() {
        DeviceStream a = stream(0);
        DeviceStream b = stream(1);
        long chunk = device.chunkSource().allocate(2 * MIB);
        try {
            occupy(a, 300);
            a.fill(chunk, (byte) 1, 4096);
            StreamFence fence = a.recordFence();
            long start = System.nanoTime();
            fence.makeWait(b);
            b.fill(chunk, (byte) 2, 4096); // must land after a's fill
            long callerMillis = (System.nanoTime() - start) / 1_000_000;
            MemorySegment out = arena.allocate(4096);
            b.copyDeviceToHost(chunk, out, 4096);
            b.synchronize();
            a.synchronize();
            assertThat(callerMillis).as("makeWait must not block the calling thread").isLessThan(250);
            for (int i = 0; i < 4096; i += 512) {
                assertThat(out.get(java.lang.foreign.ValueLayout.JAVA_BYTE, i)).as("byte %d", i).isEqualTo((byte) 2);
            }
            fence.close();
        } finally {
            device.chunkSource().free(chunk, 2 * MIB);
        }
    }

    @Test
    void chunkSourceRefusesMoreThanTheDeviceHas() {
        ChunkSource source = device.chunkSource();
        long tooMuch = (source.capacityBytes() * 2 + 2 * MIB - 1) / (2 * MIB) * (2 * MIB);
        assertThatThrownBy(() -> source.allocate(tooMuch)).isInstanceOf(OutOfDeviceMemoryException.class)
                .satisfies(e -> assertThat(((OutOfDeviceMemoryException) e).requestedBytes()).isEqualTo(tooMuch));
        long chunk = source.allocate(2 * MIB); // a failed request leaves the source usable
        source.free(chunk, 2 * MIB);
    }

    @Test
    void directAllocatorHandsOutUsableAlignedBlocksAndReportsLeaks() {
        DeviceStream stream = stream(0);
        DeviceAllocator direct = device.nativeAllocator(AllocatorMode.DIRECT).orElseThrow();
        assertThat(direct.mode()).isEqualTo(AllocatorMode.DIRECT);
        DeviceBlock block = direct.allocate(1000, stream);
        assertThat(block.size()).isGreaterThanOrEqualTo(1000);
        assertThat(block.requestedBytes()).isEqualTo(1000);
        assertThat(block.address() % 256).isZero();
        MemorySegment in = randomHost(1000, 7);
        MemorySegment out = arena.allocate(1000);
        stream.copyHostToDevice(in, block.address(), 1000);
        stream.copyDeviceToHost(block.address(), out, 1000);
        stream.synchronize();
        assertThat(out.mismatch(in)).isEqualTo(-1);
        DeviceBlock leaked = direct.allocate(300, stream);
        assertThatThrownBy(direct::close).hasMessageContaining("2 block(s), 1536 bytes");
        leaked.release();
        block.release();
        assertThatThrownBy(block::release).hasMessageContaining("double release");
        assertThatThrownBy(() -> direct.allocate(0, stream)).isInstanceOf(IllegalArgumentException.class);
    }
}
