package io.gpupool.config;

import io.gpupool.backend.ComputeDevice;
import io.gpupool.backend.DeviceStream;
import io.gpupool.backend.KernelFunction;
import io.gpupool.backend.KernelModule;
import io.gpupool.backend.MatmulLibrary;
import io.gpupool.kernels.cuda.CudaTensorOps;
import io.gpupool.kernels.cuda.AttentionKernels;
import io.gpupool.kernels.cuda.GemmEngine;
import io.gpupool.kernels.cuda.Precision;
import io.gpupool.memory.metric.AllocatorMode;
import io.gpupool.memory.ChunkSource;
import io.gpupool.memory.DeviceAllocator;
import io.gpupool.serving.fake.CountingAllocator;
import org.junit.jupiter.api.Test;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * Which GEMM engine a CUDA device gets: under AUTO the library where the device has one, else gpupool's kernels
 * (the server still starts); under CUBLASLT a missing library stops startup naming the setting; OWN never asks.
 */
class KernelSelectionTest {

    /** A device whose kernels load from any image and whose library lookup is scripted. */
    static final class FakeDevice implements ComputeDevice {
        final MatmulLibrary library;
        final List<Path> asked = new ArrayList<>();

        FakeDevice(MatmulLibrary library) {
            this.library = library;
        }

        @Override
        public Optional<MatmulLibrary> matmulLibrary(Path folder) {
            asked.add(folder);
            return Optional.ofNullable(library);
        }

        @Override
        public KernelModule loadModule(String name, byte[] image) {
            return kernel -> (KernelFunction) () -> kernel;
        }

        @Override public int index() { return 3; }
        @Override public String name() { return "fake"; }
        @Override public long totalMemory() { return 0; }
        @Override public long freeMemory() { return 0; }
        @Override public ChunkSource chunkSource() { throw new UnsupportedOperationException(); }
        @Override public Optional<DeviceAllocator> nativeAllocator(AllocatorMode mode) { return Optional.empty(); }
        @Override public DeviceStream createStream(int ordinal) { throw new UnsupportedOperationException(); }
        @Override public void bindToCurrentThread() { }
    }

    private static final MatmulLibrary LIBRARY = new MatmulLibrary() {
        @Override public String description() { return "fakeLt 2.0"; }
        @Override public long workspaceBytes() { return 1024; }
        @Override public Matmul plan(int rows, int in, int out, ElementType type, Compute compute, Epilogue e) {
            throw new UnsupportedOperationException();
        }
        @Override public Matmul planResidual(int rows, int in, int out, ElementType type, Compute compute,
                                             Epilogue e) {
            throw new UnsupportedOperationException();
        }
    };

    private final CountingAllocator pool = new CountingAllocator(1 << 20);

    private static KernelProperties kernels(GemmEngine engine, Precision precision) {
        KernelProperties kernels = new KernelProperties();
        kernels.setGemmEngine(engine);
        kernels.setPrecision(precision);
        kernels.setCublasLtDir(Path.of("/opt/cuda/lib"));
        return kernels;
    }

    @Test
    void autoUsesTheLibraryFromTheConfiguredFolder() {
        FakeDevice device = new FakeDevice(LIBRARY);
        CudaTensorOps ops = KernelSelection.cudaOps(device, kernels(GemmEngine.AUTO, Precision.BF16), pool);
        assertThat(device.asked).containsExactly(Path.of("/opt/cuda/lib"));
        assertThat(ops.gemmEngine()).isEqualTo("fakeLt 2.0");
        assertThat(ops.activationBytes()).isEqualTo(2);
    }

    @Test
    void autoWithoutTheLibraryRunsGpupoolsKernels() {
        CudaTensorOps ops = KernelSelection.cudaOps(new FakeDevice(null), kernels(GemmEngine.AUTO, Precision.BF16),
                pool);
        assertThat(ops.gemmEngine()).isEqualTo(GemmEngine.OWN_NAME);
        assertThat(ops.activationBytes()).isEqualTo(4);
    }

    @Test
    void cublasLtWithoutTheLibraryStopsStartupNamingTheSetting() {
        assertThatThrownBy(() -> KernelSelection.cudaOps(new FakeDevice(null),
                kernels(GemmEngine.CUBLASLT, Precision.FP32), pool))
                .isInstanceOf(IllegalStateException.class)
                .hasMessageContaining("gpupool.kernels.gemm-engine=CUBLASLT")
                .hasMessageContaining("device 3");
    }

    @Test
    void ownNeverLoadsTheLibrary() {
        FakeDevice device = new FakeDevice(LIBRARY);
        CudaTensorOps ops = KernelSelection.cudaOps(device, kernels(GemmEngine.OWN, Precision.FP32), pool);
        assertThat(device.asked).isEmpty();
        assertThat(ops.gemmEngine()).isEqualTo(GemmEngine.OWN_NAME);
    }

    @Test
    void theAttentionKernelsSettingReachesTheOps() {
        KernelProperties tiled = kernels(GemmEngine.AUTO, Precision.BF16);
        tiled.setAttention(AttentionKernels.TILED);
        assertThat(KernelSelection.cudaOps(new FakeDevice(LIBRARY), tiled, pool).attentionKernels())
                .isEqualTo(AttentionKernels.TILED);
        KernelProperties classic = kernels(GemmEngine.OWN, Precision.FP32);
        classic.setAttention(AttentionKernels.CLASSIC);
        assertThat(KernelSelection.cudaOps(new FakeDevice(LIBRARY), classic, pool).attentionKernels())
                .isEqualTo(AttentionKernels.CLASSIC);
    }
}
