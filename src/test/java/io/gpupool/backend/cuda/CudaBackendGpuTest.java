package io.gpupool.backend.cuda;

import io.gpupool.backend.KernelFunction;
import io.gpupool.backend.KernelModule;
import io.gpupool.memory.metric.AllocatorMode;
import io.gpupool.memory.DeviceAllocator;
import io.gpupool.memory.DeviceBlock;
import io.gpupool.memory.pool.DevicePool;
import io.gpupool.memory.GrowthPolicy;
import io.gpupool.memory.PoolConfig;
import io.gpupool.memory.PoolTuning;
import io.gpupool.memory.OutOfDeviceMemoryException;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.charset.StandardCharsets;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/** CUDA-only behaviour: kernels, driver errors, the baselines, expandable segments, cross-stream reuse. */
@Tag("gpu")
class CudaBackendGpuTest {

    private static final long MIB = 1L << 20;

    private CudaBackend backend;
    private CudaDevice device;
    private Arena arena;

    @BeforeEach
    void open() {
        backend = CudaTestSupport.backendOrSkip(CudaBackend.Options.defaults());
        device = (CudaDevice) backend.devices().getFirst();
        arena = Arena.ofShared();
    }

    @AfterEach
    void close() {
        if (arena != null) {
            arena.close();
        }
        if (backend != null) {
            backend.close();
        }
    }

    @Test
    void ptxKernelRunsWithLongIntegerAndFloatArguments() {
        KernelModule module = device.loadModule("backend_test_kernels", CudaTestSupport.testPtx());
        KernelFunction axpb = module.function("axpb");
        int n = 10_000;
        long chunk = device.plainChunkSource().allocate(2 * MIB);
        try (CudaStream stream = device.createStream(0)) {
            MemorySegment host = arena.allocate(ValueLayout.JAVA_FLOAT, n);
            for (int i = 0; i < n; i++) {
                host.setAtIndex(ValueLayout.JAVA_FLOAT, i, i);
            }
            stream.copyHostToDevice(host, chunk, 4L * n);
            stream.launch(axpb, (n + 255) / 256, 1, 1, 256, 1, 1, 0, chunk, (long) n, 2.0f, 3);
            stream.copyDeviceToHost(chunk, host, 4L * n);
            stream.synchronize();
            for (int i = 0; i < n; i += 997) {
                assertThat(host.getAtIndex(ValueLayout.JAVA_FLOAT, i)).as("x[%d]", i).isEqualTo(2.0f * i + 3);
            }
        } finally {
            device.plainChunkSource().free(chunk, 2 * MIB);
        }
    }

    @Test
    void missingKernelAndBadArgumentsAreClearErrors() {
        KernelModule module = device.loadModule("backend_test_kernels", CudaTestSupport.testPtx());
        assertThatThrownBy(() -> module.function("no_such_kernel"))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("no_such_kernel");
        try (CudaStream stream = device.createStream(0)) {
            assertThatThrownBy(() -> stream.launch(module.function("axpb"), 1, 1, 1, 1, 1, 1, 0, 0L, 1L, 1.0, 1))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("argument 2");
        }
    }

    @Test
    void driverErrorsNameTheCallAndTheResult() {
        assertThatThrownBy(() -> device.loadModule("garbage", "not ptx at all".getBytes(StandardCharsets.US_ASCII)))
                .isInstanceOf(CudaDriverException.class)
                .hasMessageContaining("cuModuleLoadData").hasMessageContaining("CUDA_ERROR_")
                .hasMessageContaining("garbage");
        long petabyte = 1L << 50;
        assertThatThrownBy(() -> device.plainChunkSource().allocate(petabyte))
                .isInstanceOf(OutOfDeviceMemoryException.class)
                .hasMessageContaining("cuMemAlloc").hasMessageContaining("CUDA_ERROR_OUT_OF_MEMORY");
    }

    @Test
    void cudaAsyncBaselineCachesAndIsSafeAcrossStreams() {
        DeviceAllocator async = device.nativeAllocator(AllocatorMode.CUDA_ASYNC).orElseThrow();
        assertThat(device.defaultPoolReleaseThreshold()).as("release threshold (UINT64_MAX)").isEqualTo(-1L);
        KernelFunction spin = device.loadModule("k", CudaTestSupport.testPtx()).function("spin_then_fill");
        long ints = (4 * MIB) / 4;
        try (CudaStream a = device.createStream(0); CudaStream b = device.createStream(1)) {
            DeviceBlock first = async.allocate(4 * MIB, a);
            // a long kernel on A writes 0x0A0A0A0A into the block after ~200 ms; the block is freed on A meanwhile
            CudaTestSupport.spinThenFill(a, spin, first.address(), ints, 0x0A0A0A0A, 200);
            long firstAddress = first.address();
            first.release();
            DeviceBlock second = async.allocate(4 * MIB, b);
            b.fill(second.address(), (byte) 0x0B, 4 * MIB);
            MemorySegment out = arena.allocate(4 * MIB);
            b.copyDeviceToHost(second.address(), out, 4 * MIB);
            b.synchronize();
            a.synchronize();
            System.out.printf("cuda-async reuse across streams: same address = %s%n", second.address() == firstAddress);
            for (long i = 0; i < 4 * MIB; i += 4096) {
                assertThat(out.get(ValueLayout.JAVA_BYTE, i)).as("byte %d of the reused block", i).isEqualTo((byte) 0x0B);
            }
            second.release();
            b.synchronize();
        }
        async.close();
    }

    @Test
    void fenceProtectsMemoryReusedOnAnotherStream() {
        // the pool's protocol for a block freed on A and handed to B: record a fence on A, make B wait on it
        KernelFunction spin = device.loadModule("k", CudaTestSupport.testPtx()).function("spin_then_fill");
        long chunk = device.plainChunkSource().allocate(4 * MIB);
        try (CudaStream a = device.createStream(0); CudaStream b = device.createStream(1)) {
            CudaTestSupport.spinThenFill(a, spin, chunk, MIB, 0x0A0A0A0A, 200); // A still writes the block
            var fence = a.recordFence(); // "free on A"
            fence.makeWait(b); // "reuse on B"
            b.fill(chunk, (byte) 0x0B, 4 * MIB);
            MemorySegment out = arena.allocate(4 * MIB);
            b.copyDeviceToHost(chunk, out, 4 * MIB);
            b.synchronize();
            for (long i = 0; i < 4 * MIB; i += 4096) {
                assertThat(out.get(ValueLayout.JAVA_BYTE, i)).as("byte %d", i).isEqualTo((byte) 0x0B);
            }
            fence.close();
        } finally {
            device.plainChunkSource().free(chunk, 4 * MIB);
        }
    }

    /** A GLOBAL_ONLY pool of exactly one 4 MiB block with lazy fences: a stream asking for 4 MiB gets that block. */
    private DevicePool oneBlockLazyPool() {
        return new DevicePool(device.plainChunkSource(), PoolConfig.defaults().withBlocks(2 * MIB, 4 * MIB)
                .withGrowth(GrowthPolicy.EAGER, 4 * MIB).apply(PoolTuning.builder().capBytes(4 * MIB).build())
                .withMode(AllocatorMode.GLOBAL_ONLY).withLazyFences(true));
    }

    private static long fencesTaken(CudaStream stream) {
        return stream.events().created() + stream.events().reused();
    }

    @Test
    void lazyFenceRecordedWhenAnotherStreamTakesTheBlockMakesItWaitForTheKernelStillWriting() {
        KernelFunction spin = device.loadModule("k", CudaTestSupport.testPtx()).function("spin_then_fill");
        DevicePool pool = oneBlockLazyPool();
        try (CudaStream a = device.createStream(0); CudaStream b = device.createStream(1)) {
            DeviceBlock onA = pool.allocate(4 * MIB, a);
            CudaTestSupport.spinThenFill(a, spin, onA.address(), MIB, 0x0A0A0A0A, 200); // A still writes the block
            long before = fencesTaken(a);
            onA.release();
            assertThat(fencesTaken(a)).as("the free records no event").isEqualTo(before);
            DeviceBlock onB = pool.allocate(4 * MIB, b);
            assertThat(onB.address()).as("the pool's only block").isEqualTo(onA.address());
            assertThat(fencesTaken(a)).as("one event recorded on A when B took the block").isEqualTo(before + 1);
            b.fill(onB.address(), (byte) 0x0B, 4 * MIB);
            MemorySegment out = arena.allocate(4 * MIB);
            b.copyDeviceToHost(onB.address(), out, 4 * MIB);
            b.synchronize();
            for (long i = 0; i < 4 * MIB; i += 4096) {
                assertThat(out.get(ValueLayout.JAVA_BYTE, i)).as("byte %d: B wrote after A's kernel", i).isEqualTo((byte) 0x0B);
            }
            onB.release();
            a.synchronize();
            b.synchronize();
        } finally {
            pool.close();
        }
    }

    @Test
    void lazyFenceOfASynchronisedStreamRecordsNothing() {
        DevicePool pool = oneBlockLazyPool();
        try (CudaStream a = device.createStream(0); CudaStream b = device.createStream(1)) {
            DeviceBlock onA = pool.allocate(4 * MIB, a);
            a.fill(onA.address(), (byte) 0x0A, 4 * MIB);
            long before = fencesTaken(a);
            onA.release();
            a.synchronize();                                   // the request's end
            DeviceBlock onB = pool.allocate(4 * MIB, b);
            assertThat(onB.address()).isEqualTo(onA.address());
            assertThat(fencesTaken(a)).as("no event: A's work finished").isEqualTo(before);
            assertThat(pool.metrics().crossStreamWaits()).isZero();
            onB.release();
            b.synchronize();
        } finally {
            pool.close();
        }
    }

    @Test
    void globalOnlyPoolRecyclesFenceEventsInsteadOfCreatingOnePerFree() {
        // with lazy fences off every GLOBAL_ONLY free records a fence; its event must come back for the next one
        DevicePool pool = new DevicePool(device.plainChunkSource(),
                PoolConfig.defaults().withMode(AllocatorMode.GLOBAL_ONLY).withLazyFences(false));
        try (CudaStream stream = device.createStream(0)) {
            try {
                for (int i = 0; i < 2000; i++) {
                    pool.allocate(64 << 10, stream).release();
                }
                stream.synchronize();
            } finally {
                pool.close();
            }
            EventRecycler<?> events = stream.events();
            assertThat(events.created() + events.reused()).as("fences recorded").isGreaterThanOrEqualTo(2000);
            assertThat(events.created()).as("events created for 2000 fences").isLessThanOrEqualTo(CudaStream.SPARE_EVENTS);
        }
    }

    @Test
    void fenceEventsComeBackToTheirStreamWhenClosedOnAnotherThread() throws Exception {
        try (CudaStream a = device.createStream(0)) {
            var fence = a.recordFence();
            long createdBefore = a.events().created();
            Thread closer = Thread.ofPlatform().start(fence::close);
            closer.join();
            var next = a.recordFence();
            assertThat(a.events().created()).as("the closed fence's event was reused").isEqualTo(createdBefore);
            next.await();
            assertThat(next.isComplete()).isTrue();
            next.close();
            assertThatThrownBy(fence::isComplete).as("a closed fence refuses use").isInstanceOf(IllegalStateException.class);
        }
    }

    @Test
    void expandableSegmentsGrowContiguouslyAndRefillHoles() {
        ExpandableChunkSource source = device.expandableChunkSource();
        long g = source.granularity();
        assertThat(g).isPositive();
        long first = source.allocate(g);
        long second = source.allocate(2 * g);
        assertThat(second).as("second growth step starts where the first ends").isEqualTo(first + g);
        assertThat(source.mappedBytes()).isEqualTo(3 * g);
        try (CudaStream stream = device.createStream(0)) {
            long span = 2 * MIB + 12345; // one copy crossing the boundary between the two growth steps
            long at = first + g - MIB;
            MemorySegment in = arena.allocate(span);
            for (long i = 0; i < span; i++) {
                in.set(ValueLayout.JAVA_BYTE, i, (byte) (i * 31));
            }
            MemorySegment out = arena.allocate(span);
            stream.copyHostToDevice(in, at, span);
            stream.copyDeviceToHost(at, out, span);
            stream.synchronize();
            assertThat(out.mismatch(in)).isEqualTo(-1);
        }
        source.free(first, g);
        long refill = source.allocate(g);
        assertThat(refill).as("a freed hole is filled first").isEqualTo(first);
        assertThatThrownBy(() -> source.allocate(g + 1)).isInstanceOf(IllegalArgumentException.class);
        source.free(refill, g);
        source.free(second, 2 * g);
        assertThat(source.mappedBytes()).isZero();
    }

    @Test
    void stagingStaysWithinItsBound() {
        backend.close();
        backend = CudaTestSupport.backendOrSkip(CudaBackend.Options.defaults().withStaging(64 << 10, 2, 4));
        device = (CudaDevice) backend.devices().getFirst();
        long chunk = device.plainChunkSource().allocate(2 * MIB);
        try (CudaStream stream = device.createStream(0)) {
            MemorySegment in = arena.allocate(MIB);
            for (long i = 0; i < MIB; i += 8) {
                in.set(ValueLayout.JAVA_LONG, i, i);
            }
            MemorySegment out = arena.allocate(MIB);
            stream.copyHostToDevice(in, chunk, MIB);
            stream.copyDeviceToHost(chunk, out, MIB);
            stream.synchronize();
            assertThat(out.mismatch(in)).isEqualTo(-1);
            // 4 slots of 64 KiB in flight at most: one 2 MiB pinned chunk (the pool's smallest block) suffices
            assertThat(device.pinnedStagingBytes()).isBetween(1L, 2 * MIB);
        } finally {
            device.plainChunkSource().free(chunk, 2 * MIB);
        }
    }
}
