package io.gpupool.backend.cuda;

import io.gpupool.backend.DeviceGraph;
import io.gpupool.backend.DeviceStream;
import io.gpupool.backend.GraphCapture;
import io.gpupool.backend.KernelFunction;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * Kernel launches on a real GPU through both paths ({@link FfmKernelLauncher}, {@link JCudaKernelLauncher}): every
 * argument of a kernel with eleven mixed parameters arrives intact, driver errors name the call and the kernel, and
 * the FFM path stays correct where its shared argument buffer could be overwritten: a second thread launching on
 * the same stream, more arguments than the buffer holds, a graph replayed after later launches rewrote the buffer.
 */
@Tag("gpu")
class CudaKernelLaunchGpuTest {

    private static final long MIB = 1L << 20;
    private static final int ECHO_WORDS = 10;
    private static final long ECHO_BYTES = 8L * ECHO_WORDS;

    private CudaBackend backend;
    private CudaDevice device;
    private KernelFunction echo;
    private long chunk;
    private Arena arena;

    @BeforeEach
    void open() {
        backend = CudaTestSupport.backendOrSkip(CudaBackend.Options.defaults());
        device = (CudaDevice) backend.devices().getFirst();
        device.bindToCurrentThread();
        echo = device.loadModule("backend_test_kernels", CudaTestSupport.testPtx()).function("echo_arguments");
        chunk = device.plainChunkSource().allocate(2 * MIB);
        arena = Arena.ofShared();
    }

    @AfterEach
    void close() {
        if (backend == null) {
            return;
        }
        arena.close();
        device.plainChunkSource().free(chunk, 2 * MIB);
        backend.close();
    }

    private CudaStream stream(String path) {
        Function<Cu.StreamHandle, KernelLauncher> launchers = switch (path) {
            case "ffm" -> handle -> new FfmKernelLauncher(LibCudaLaunch.get().orElseThrow(), handle.address());
            case "jcuda" -> JCudaKernelLauncher::new;
            default -> throw new IllegalArgumentException(path);
        };
        return new CudaStream(device, 0, CudaStream.SPARE_EVENTS, launchers);
    }

    /** The arguments echo_arguments gets for launch {@code k}, writing to {@code out}. */
    private static Object[] echoArguments(long out, int k) {
        return new Object[] {out, 0x0123_4567_89AB_CDEFL + k, -k, k + 0.25f, -1L - k, Integer.MIN_VALUE + k,
                -k * 1.5f, (long) k << 33, 7 * k, Float.MAX_VALUE / (k + 1), k ^ 0x5A5A5A5A};
    }

    /** What echo_arguments writes for {@link #echoArguments}: each scalar widened, floats as their bits. */
    private static long[] expectedEcho(int k) {
        Object[] args = echoArguments(0, k);
        long[] words = new long[ECHO_WORDS];
        for (int i = 0; i < ECHO_WORDS; i++) {
            words[i] = switch (args[i + 1]) {
                case Long v -> v;
                case Integer v -> v;
                case Float v -> Float.floatToRawIntBits(v);
                default -> throw new IllegalStateException();
            };
        }
        return words;
    }

    private static long[] words(MemorySegment host, long offset) {
        return host.asSlice(offset, ECHO_BYTES).toArray(ValueLayout.JAVA_LONG);
    }

    private MemorySegment readBack(DeviceStream stream, long bytes) {
        MemorySegment host = arena.allocate(bytes, 8);
        stream.copyDeviceToHost(chunk, host, bytes);
        stream.synchronize();
        return host;
    }

    @Test
    void streamsLaunchThroughFfmWhereTheBindingCanBeMade() {
        assertThat(LibCudaLaunch.get()).as("cuLaunchKernel bound through FFM").isPresent();
        try (CudaStream stream = device.createStream(3)) {
            assertThat(stream.launchPath()).isEqualTo("ffm");
        }
    }

    @ParameterizedTest
    @ValueSource(strings = {"ffm", "jcuda"})
    void everyArgumentOfAMixedKernelArrivesIntact(String path) {
        try (CudaStream stream = stream(path)) {
            assertThat(stream.launchPath()).isEqualTo(path);
            stream.fill(chunk, (byte) 0, 8 * ECHO_BYTES);
            for (int k = 0; k < 8; k++) {
                stream.launch(echo, 1, 1, 1, 32, 1, 1, 0, echoArguments(chunk + k * ECHO_BYTES, k));
            }
            MemorySegment host = readBack(stream, 8 * ECHO_BYTES);
            for (int k = 0; k < 8; k++) {
                assertThat(words(host, k * ECHO_BYTES)).as("launch %d through %s", k, path).containsExactly(expectedEcho(k));
            }
        }
    }

    @ParameterizedTest
    @ValueSource(strings = {"ffm", "jcuda"})
    void aRefusedLaunchNamesTheCallTheResultAndTheKernelAndTheStreamStaysUsable(String path) {
        try (CudaStream stream = stream(path)) {
            assertThatThrownBy(() -> stream.launch(echo, 1, 1, 1, 4096, 1, 1, 0, echoArguments(chunk, 1)))
                    .isInstanceOf(CudaDriverException.class)
                    .hasMessageContaining("cuLaunchKernel").hasMessageContaining("CUDA_ERROR_INVALID_VALUE")
                    .hasMessageContaining("echo_arguments");
            stream.launch(echo, 1, 1, 1, 32, 1, 1, 0, echoArguments(chunk, 2));
            assertThat(words(readBack(stream, ECHO_BYTES), 0)).containsExactly(expectedEcho(2));
        }
    }

    @Test
    void twoThreadsLaunchingOnOneStreamAtOnceEachGetTheirOwnArguments() throws Exception {
        int perThread = 2000;
        try (CudaStream stream = stream("ffm"); ExecutorService pool = Executors.newFixedThreadPool(2)) {
            stream.fill(chunk, (byte) 0, 2 * perThread * ECHO_BYTES);
            stream.synchronize();
            CyclicBarrier start = new CyclicBarrier(2);
            CompletableFuture<?>[] threads = new CompletableFuture<?>[2];
            for (int t = 0; t < 2; t++) {
                int first = t * perThread;
                threads[t] = CompletableFuture.runAsync(() -> {
                    try {
                        start.await();
                    } catch (Exception e) {
                        throw new IllegalStateException(e);
                    }
                    for (int k = first; k < first + perThread; k++) {
                        stream.launch(echo, 1, 1, 1, 32, 1, 1, 0, echoArguments(chunk + k * ECHO_BYTES, k));
                    }
                }, pool);
            }
            CompletableFuture.allOf(threads).get(60, TimeUnit.SECONDS);
            MemorySegment host = readBack(stream, 2 * perThread * ECHO_BYTES);
            for (int k = 0; k < 2 * perThread; k++) {
                assertThat(words(host, k * ECHO_BYTES)).as("launch %d", k).containsExactly(expectedEcho(k));
            }
        }
    }

    @Test
    void aKernelWithMoreArgumentsThanTheStreamsBufferHoldsStillGetsThemAll() {
        Function<Cu.StreamHandle, KernelLauncher> fourSlots =
                handle -> new FfmKernelLauncher(LibCudaLaunch.get().orElseThrow(), handle.address(), 4);
        try (CudaStream stream = new CudaStream(device, 0, CudaStream.SPARE_EVENTS, fourSlots)) {
            stream.launch(echo, 1, 1, 1, 32, 1, 1, 0, echoArguments(chunk, 5));
            assertThat(words(readBack(stream, ECHO_BYTES), 0)).containsExactly(expectedEcho(5));
        }
    }

    @Test
    void aCapturedLaunchKeepsItsArgumentsWhenLaterLaunchesReuseTheBuffer() {
        GraphCapture.CopyListener noCopies = new GraphCapture.CopyListener() {
            @Override
            public void hostToDevice(long deviceAddress, long bytes) {
            }

            @Override
            public void deviceToHost(long deviceAddress, long bytes) {
            }
        };
        try (CudaGraphCapture capture = new CudaGraphCapture(device, 9); CudaStream serving = device.createStream(0)) {
            serving.fill(chunk, (byte) 0, 2 * ECHO_BYTES);
            serving.synchronize();
            DeviceStream recording = capture.begin(noCopies);
            recording.launch(echo, 1, 1, 1, 32, 1, 1, 0, echoArguments(chunk, 11));
            try (DeviceGraph graph = capture.end()) {
                // overwrite the capture stream's argument buffer with other values, then replay
                capture.stream().launch(echo, 1, 1, 1, 32, 1, 1, 0, echoArguments(chunk + ECHO_BYTES, 12));
                capture.stream().synchronize();
                graph.launch(serving);
                MemorySegment host = readBack(serving, 2 * ECHO_BYTES);
                assertThat(words(host, 0)).as("the replayed launch").containsExactly(expectedEcho(11));
                assertThat(words(host, ECHO_BYTES)).as("the eager launch after it").containsExactly(expectedEcho(12));
            }
        }
    }
}
