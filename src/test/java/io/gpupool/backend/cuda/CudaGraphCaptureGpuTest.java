package io.gpupool.backend.cuda;

import io.gpupool.backend.DeviceGraph;
import io.gpupool.backend.DeviceStream;
import io.gpupool.backend.GraphCapture;
import io.gpupool.backend.GraphCaptureException;
import io.gpupool.memory.DeviceAllocator;
import io.gpupool.memory.DeviceBlock;
import io.gpupool.memory.StreamFence;
import io.gpupool.memory.metric.AllocatorMode;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import static jcuda.driver.JCudaDriver.cuStreamQuery;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * Stream capture on a real GPU, under the rules {@link CudaGraphCapture} states: another thread's
 * allocations, fence queries and synchronizes do not invalidate a thread-local capture; an illegal
 * call on the capturing stream does, and the capture then ends with a clear failure, leaves the
 * stream out of capture mode and usable, and the next capture works; a fence asked of the capturing
 * stream is refused without touching the capture.
 */
@Tag("gpu")
class CudaGraphCaptureGpuTest {

    private static final int BYTES = 4096;
    private static final GraphCapture.CopyListener NO_COPIES = new GraphCapture.CopyListener() {
        @Override
        public void hostToDevice(long deviceAddress, long bytes) {
        }

        @Override
        public void deviceToHost(long deviceAddress, long bytes) {
        }
    };

    private CudaBackend cuda;
    private CudaDevice device;
    private DeviceAllocator direct;
    private DeviceStream serving;
    private CudaGraphCapture capture;
    private DeviceBlock buffer;

    @BeforeEach
    void setUp() {
        cuda = CudaTestSupport.backendOrSkip(CudaBackend.Options.defaults());
        device = (CudaDevice) cuda.devices().getFirst();
        device.bindToCurrentThread();
        direct = device.nativeAllocator(AllocatorMode.DIRECT).orElseThrow();
        serving = device.createStream(0);
        capture = new CudaGraphCapture(device, 7);
        buffer = direct.allocate(BYTES, serving);
        serving.fill(buffer.address(), (byte) 0, BYTES);
        serving.synchronize();
    }

    @AfterEach
    void tearDown() {
        if (cuda == null) {
            return;
        }
        try {
            assertThat(capture.capturing()).as("no stream left capturing").isFalse();
        } finally {
            capture.close();
            buffer.release();
            serving.close();
            direct.close();
            cuda.close();
        }
    }

    @Test
    void otherThreadsAllocatingQueryingAndSynchronizingDoNotInvalidateAThreadLocalCapture() throws Exception {
        DeviceStream recording = capture.begin(NO_COPIES);
        recording.fill(buffer.address(), (byte) 7, BYTES);

        CompletableFuture<Void> other = CompletableFuture.runAsync(() -> {
            device.bindToCurrentThread();
            try (DeviceStream own = device.createStream(1)) {
                DeviceBlock block = direct.allocate(1 << 20, own);         // cuMemAlloc
                own.fill(block.address(), (byte) 1, 1 << 20);
                StreamFence fence = own.recordFence();
                fence.isComplete();                                          // cuEventQuery
                own.synchronize();                                           // cuStreamSynchronize
                fence.await();                                               // cuEventSynchronize
                fence.close();
                block.release();                                             // cuMemFree
            }
        });
        other.get(30, TimeUnit.SECONDS);
        assertThat(capture.capturing()).isTrue();

        recording.fill(buffer.address(), (byte) 9, BYTES / 2);
        DeviceGraph graph = capture.end();
        assertThat(capture.capturing()).isFalse();
        try {
            assertThat(bytes()).as("nothing recorded has run yet").containsOnly(0);
            graph.launch(serving);
            byte[] after = bytes();
            assertThat(java.util.Arrays.copyOfRange(after, 0, BYTES / 2)).containsOnly(9);
            assertThat(java.util.Arrays.copyOfRange(after, BYTES / 2, BYTES)).containsOnly(7);
        } finally {
            graph.close();
        }
    }

    @Test
    void anIllegalCallInvalidatesTheCaptureWhichThenEndsCleanlyAndTheNextCaptureWorks() {
        DeviceStream recording = capture.begin(NO_COPIES);
        recording.fill(buffer.address(), (byte) 5, BYTES);
        int query = cuStreamQuery(((CudaStream) recording).handle());    // illegal on a capturing stream
        assertThat(query).as("cuStreamQuery on a capturing stream").isNotZero();

        assertThatThrownBy(capture::end).isInstanceOf(GraphCaptureException.class)
                .hasMessageContaining("cuStreamEndCapture");
        assertThat(capture.capturing()).isFalse();
        assertThat(capture.replacedStreams()).as("the stream recovered, no replacement needed").isZero();

        DeviceStream usable = capture.stream();
        usable.fill(buffer.address(), (byte) 3, BYTES);
        usable.synchronize();
        assertThat(bytes()).containsOnly(3);

        DeviceStream again = capture.begin(NO_COPIES);
        again.fill(buffer.address(), (byte) 4, BYTES);
        DeviceGraph graph = capture.end();
        try {
            graph.launch(serving);
            assertThat(bytes()).containsOnly(4);
        } finally {
            graph.close();
        }
    }

    @Test
    void anAbortedCaptureRunsNothingAndLeavesTheStreamUsable() {
        DeviceStream recording = capture.begin(NO_COPIES);
        recording.fill(buffer.address(), (byte) 6, BYTES);
        capture.abort();
        assertThat(capture.capturing()).isFalse();
        capture.stream().synchronize();
        assertThat(bytes()).as("the discarded fill never ran").containsOnly(0);
    }

    @Test
    void aFenceAskedOfTheCapturingStreamIsRefusedWithoutTouchingTheCapture() {
        DeviceStream recording = capture.begin(NO_COPIES);
        recording.fill(buffer.address(), (byte) 8, BYTES);
        assertThatThrownBy(recording::recordFence).isInstanceOf(GraphCaptureException.class)
                .hasMessageContaining("while it captures");
        DeviceGraph graph = capture.end();
        try {
            graph.launch(serving);
            assertThat(bytes()).containsOnly(8);
        } finally {
            graph.close();
        }
    }

    /** The buffer's bytes, after the serving stream's work (a shared arena: the stream's worker thread does the copy). */
    private byte[] bytes() {
        try (Arena arena = Arena.ofShared()) {
            MemorySegment host = arena.allocate(BYTES);
            serving.copyDeviceToHost(buffer.address(), host, BYTES);
            serving.synchronize();
            return host.toArray(ValueLayout.JAVA_BYTE);
        }
    }
}
