package io.gpupool.backend.host;

import io.gpupool.backend.ComputeBackend;
import io.gpupool.backend.DeviceStream;
import io.gpupool.backend.DeviceStreamContract;
import io.gpupool.memory.metric.AllocatorMode;
import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class HostDeviceStreamTest extends DeviceStreamContract {

    @Override
    protected ComputeBackend createBackend() {
        return new HostBackend(256L << 20);
    }

    @Override
    protected void occupy(DeviceStream stream, long millis) {
        stream.enqueueHostTask(() -> {
            try {
                Thread.sleep(millis);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        });
    }

    @Test
    void launchAndModulesAreUnsupportedOnTheHost() {
        DeviceStream stream = stream(0);
        assertThatThrownBy(() -> stream.launch(() -> "gemm", 1, 1, 1, 1, 1, 1, 0))
                .isInstanceOf(UnsupportedOperationException.class).hasMessageContaining("gemm");
        assertThatThrownBy(() -> device.loadModule("kernels", new byte[] {1}))
                .isInstanceOf(UnsupportedOperationException.class);
        assertThat(device.nativeAllocator(AllocatorMode.CUDA_ASYNC)).isEmpty();
    }

    @Test
    void fencesOfAnIdleStreamAreOneObjectAndANewOneFollowsQueuedWork() {
        DeviceStream stream = stream(0);
        var first = stream.recordFence();
        first.close(); // a no-op on the host: the fence stays usable for whoever got it too
        var again = stream.recordFence();
        assertThat(again).as("no task queued since: no new fence").isSameAs(first);
        assertThat(again.isComplete()).isTrue();
        occupy(stream, 200);
        var busy = stream.recordFence();
        assertThat(busy).isNotSameAs(first);
        assertThat(busy.isComplete()).isFalse();
        assertThat(first.isComplete()).isTrue();
        busy.await();
    }

    @Test
    void chunksAndDirectBlocksShareTheBudget() {
        long before = device.freeMemory();
        long chunk = device.chunkSource().allocate(4L << 20);
        assertThat(device.freeMemory()).isEqualTo(before - (4L << 20));
        var direct = device.nativeAllocator(AllocatorMode.DIRECT).orElseThrow();
        DeviceStream stream = stream(0);
        var block = direct.allocate(100, stream);
        assertThat(device.freeMemory()).isEqualTo(before - (4L << 20) - 256);
        block.release();
        stream.synchronize(); // the direct free runs in stream order on the block's stream
        device.chunkSource().free(chunk, 4L << 20);
        assertThat(device.freeMemory()).isEqualTo(before);
        direct.close();
    }

    @Test
    void directAllocatorMetricsFollowItsBlocks() {
        var direct = device.nativeAllocator(AllocatorMode.DIRECT).orElseThrow();
        var stream = stream(0);
        var a = direct.allocate(100, stream);
        var b = direct.allocate(1000, stream);
        assertThat(direct.metrics().allocatedBytes()).isEqualTo(256 + 1024);
        assertThat(direct.metrics().requestedBytes()).isEqualTo(1100);
        assertThat(direct.metrics().reservedBytes()).isEqualTo(256 + 1024);
        a.release();
        b.release();
        assertThat(direct.metrics().allocatedBytes()).isZero();
        assertThat(direct.metrics().reservedBytes()).isZero();
        assertThat(direct.metrics().peakAllocatedBytes()).isEqualTo(256 + 1024);
        direct.close();
    }

    @Test
    void directFreeWaitsForWorkQueuedBeforeTheRelease() {
        var direct = device.nativeAllocator(AllocatorMode.DIRECT).orElseThrow();
        DeviceStream stream = stream(0);
        long bytes = 64L << 20; // large enough that the C allocator unmaps it on free
        var block = direct.allocate(bytes, stream);
        long budgetWhileHeld = device.freeMemory();
        occupy(stream, 100);
        long[] sum = new long[1];
        stream.enqueueHostTask(() -> {
            var memory = java.lang.foreign.MemorySegment.ofAddress(block.address()).reinterpret(bytes);
            memory.fill((byte) 1);
            sum[0] = memory.get(java.lang.foreign.ValueLayout.JAVA_BYTE, bytes - 1);
        });
        block.release(); // while the stream still has the write queued
        assertThat(device.freeMemory()).isEqualTo(budgetWhileHeld);
        stream.synchronize();
        assertThat(sum[0]).isEqualTo(1);
        assertThat(device.freeMemory()).isEqualTo(budgetWhileHeld + bytes);
        direct.close();
    }

    @Test
    void directBlocksOutliveTheirStream() {
        // model weights are allocated on a loading stream that closes long before the model does
        var direct = device.nativeAllocator(AllocatorMode.DIRECT).orElseThrow();
        DeviceStream loading = device.createStream(7);
        long before = device.freeMemory();
        var weights = direct.allocate(1 << 20, loading);
        loading.close();
        weights.release();
        assertThat(device.freeMemory()).isEqualTo(before);
        direct.close();
    }

    @Test
    void freeOfUnknownOrMisSizedChunkIsRejected() {
        long chunk = device.chunkSource().allocate(2L << 20);
        assertThatThrownBy(() -> device.chunkSource().free(chunk, 4L << 20)).hasMessageContaining("has 2097152 bytes");
        assertThatThrownBy(() -> device.chunkSource().free(chunk + 4096, 2L << 20)).hasMessageContaining("unknown chunk");
        device.chunkSource().free(chunk, 2L << 20);
    }

    @Test
    void defaultBudgetIsAtMostEightGibibytes() {
        assertThat(HostBackend.defaultBudget()).isPositive().isLessThanOrEqualTo(8L << 30);
        try (HostBackend defaults = new HostBackend()) {
            assertThat(defaults.devices().getFirst().totalMemory()).isEqualTo(HostBackend.defaultBudget());
        }
    }
}
