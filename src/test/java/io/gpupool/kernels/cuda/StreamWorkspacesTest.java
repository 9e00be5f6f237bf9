package io.gpupool.kernels.cuda;

import io.gpupool.kernels.StreamWorkspaces;
import io.gpupool.kernels.TensorOps.Activation;
import io.gpupool.kernels.cuda.CudaTensorOpsLaunchTest.RecordingDevice;
import io.gpupool.kernels.cuda.CudaTensorOpsLaunchTest.RecordingStream;
import io.gpupool.kernels.cuda.CudaTensorOpsLibraryTest.RecordingLibrary;
import io.gpupool.kernels.cuda.CudaTensorOpsLibraryTest.Run;
import io.gpupool.memory.PoolConfig;
import io.gpupool.memory.pool.DevicePool;
import io.gpupool.replay.SimulatedChunkSource;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * The cuBLASLt workspaces of {@link CudaTensorOps}, without a GPU: a library that needs a workspace per stream, a
 * real pool (bookkeeping over simulated chunks). A stream's workspace is one pool block taken on its first product
 * and given back when its owner releases the idle stream, so the pool's allocated bytes return to 0; the next
 * product takes one again. A workspace handed out while the stream captured a graph is never given back before
 * close, since the graph writes to that address on every replay.
 */
class StreamWorkspacesTest {

    private final RecordingDevice device = new RecordingDevice();
    private final RecordingLibrary library = new RecordingLibrary();
    private final DevicePool pool = new DevicePool(new SimulatedChunkSource("test", 1L << 34), PoolConfig.defaults());
    private final CudaTensorOps ops = new CudaTensorOps(device, Precision.BF16, library, pool);
    private final StreamWorkspaces workspaces = ops.workspaces().orElseThrow();

    @AfterEach
    void closeAll() {
        ops.close();
        assertThat(pool.metrics().allocatedBytes()).as("nothing left in the pool after close").isZero();
        pool.close();
    }

    private void product(RecordingStream stream) {
        ops.linear(stream, 0x1000, 0x2000, 0x3000, 0x4000, 128, 768, 768, Activation.NONE);
    }

    @Test
    void anIdleStreamGivesItsWorkspaceBackAndTheNextProductTakesOneAgain() {
        RecordingStream first = new RecordingStream(device, 0);
        RecordingStream second = new RecordingStream(device, 1);
        product(first);
        product(first);
        product(second);
        long one = library.workspaceBytes();
        assertThat(pool.metrics().allocatedBytes()).isEqualTo(2 * one);
        assertThat(workspaces.heldBytes()).isEqualTo(2 * one);
        assertThat(workspaces.streams()).isEqualTo(2);
        assertThat(library.runs.get(0).workspace()).isEqualTo(library.runs.get(1).workspace()).isNotZero();

        assertThat(workspaces.release(first)).isEqualTo(one);
        assertThat(workspaces.release(first)).as("nothing left to give").isZero();
        assertThat(workspaces.release(second)).isEqualTo(one);
        assertThat(pool.metrics().allocatedBytes()).as("the pool drained").isZero();
        assertThat(workspaces.heldBytes()).isZero();
        assertThat(workspaces.releases()).isEqualTo(2);

        product(first);
        assertThat(library.runs.getLast().workspace()).isNotZero();
        assertThat(pool.metrics().allocatedBytes()).isEqualTo(one);
        assertThat(library.plans).as("plans survive a released workspace: one per shape and stream").hasSize(2);
    }

    @Test
    void aWorkspaceAGraphCapturedStaysAtItsAddressUntilClose() {
        RecordingStream capture = new RecordingStream(device, 2);
        RecordingStream serving = new RecordingStream(device, 0);
        product(capture);                               // taken before the capture, pinned when captured
        capture.capturing = true;
        product(capture);
        capture.capturing = false;
        product(serving);
        long one = library.workspaceBytes();
        assertThat(workspaces.capturedBytes()).isEqualTo(one);

        assertThat(workspaces.release(capture)).as("a graph replays into it").isZero();
        assertThat(workspaces.release(serving)).isEqualTo(one);
        product(capture);
        assertThat(library.runs).extracting(Run::workspace).filteredOn(w -> w == library.runs.getFirst().workspace())
                .hasSize(3);
        assertThat(pool.metrics().allocatedBytes()).isEqualTo(one);
        assertThat(workspaces.heldBytes()).isEqualTo(one);
    }

    @Test
    void aWorkspaceTakenDuringACaptureIsPinnedToo() {
        RecordingStream capture = new RecordingStream(device, 2);
        capture.capturing = true;
        product(capture);
        capture.capturing = false;
        assertThat(workspaces.release(capture)).isZero();
        assertThat(workspaces.capturedBytes()).isEqualTo(workspaces.heldBytes()).isEqualTo(library.workspaceBytes());
    }

    @Test
    void afterCloseNoWorkspaceIsHandedOut() {
        RecordingStream stream = new RecordingStream(device, 0);
        product(stream);
        ops.close();
        assertThat(pool.metrics().allocatedBytes()).isZero();
        assertThatThrownBy(() -> workspaces.address(stream)).hasMessageContaining("closed");
        assertThatThrownBy(() -> new StreamWorkspaces(pool, 0)).hasMessageContaining("bytesPerStream = 0");
    }
}
