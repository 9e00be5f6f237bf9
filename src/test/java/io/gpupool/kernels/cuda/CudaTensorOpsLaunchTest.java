package io.gpupool.kernels.cuda;

import io.gpupool.backend.ComputeDevice;
import io.gpupool.backend.DeviceStream;
import io.gpupool.backend.KernelFunction;
import io.gpupool.backend.KernelModule;
import io.gpupool.kernels.TensorOps.Activation;
import io.gpupool.kernels.TensorOps.Pooling;
import io.gpupool.memory.metric.AllocatorMode;
import io.gpupool.memory.ChunkSource;
import io.gpupool.memory.DeviceAllocator;
import io.gpupool.memory.StreamFence;
import org.junit.jupiter.api.Test;

import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * Which kernel {@link CudaTensorOps} launches, with which grid, block and arguments: checked without a GPU
 * against a device that records launches. A wrong grid or argument order would compute garbage on the GPU.
 */
class CudaTensorOpsLaunchTest {

    record Launch(String kernel, int[] grid, int[] block, List<Object> arguments) {
    }

    private final RecordingDevice device = new RecordingDevice();
    private final RecordingStream stream = new RecordingStream(device);

    @Test
    void modulesAreLoadedFromTheCommittedPtx() {
        new CudaTensorOps(device);
        assertThat(device.modules).containsExactly("gemm", "attention", "ops", "packed");
    }

    @Test
    void fp32LinearAlwaysUsesTheExactKernelWithRowsOutInOrder() {
        CudaTensorOps ops = new CudaTensorOps(device, Precision.FP32, false);
        ops.linear(stream, 0x1000, 0x2000, 0, 0x3000, 300, 768, 200, Activation.GELU);
        Launch launch = stream.only();
        assertThat(launch.kernel()).isEqualTo("gemm_f32");
        assertThat(launch.grid()).containsExactly(2, 3, 1);
        assertThat(launch.block()).containsExactly(256, 1, 1);
        assertThat(launch.arguments()).containsExactly(0x1000L, 0x2000L, 0L, 0x3000L, 300, 200, 768,
                Activation.GELU.ordinal());
    }

    @Test
    void tensorCoreLinearPicksTheTileByProductSize() {
        CudaTensorOps ops = new CudaTensorOps(device, Precision.BF16, false);
        ops.linear(stream, 0x1000, 0x2000, 0x2800, 0x3000, 128, 768, 768, Activation.NONE);
        ops.linear(stream, 0x1000, 0x2000, 0x2800, 0x3000, 16384, 768, 3072, Activation.NONE);
        assertThat(stream.launches.get(0).kernel()).isEqualTo("gemm_tc_bf16_64");
        assertThat(stream.launches.get(0).grid()).containsExactly(12, 2, 1);
        assertThat(stream.launches.get(0).block()).containsExactly(128, 1, 1);
        assertThat(stream.launches.get(1).kernel()).isEqualTo("gemm_tc_bf16_128");
        assertThat(stream.launches.get(1).grid()).containsExactly(24, 128, 1);
        assertThat(stream.launches.get(1).block()).containsExactly(256, 1, 1);
    }

    @Test
    void splitTf32PrecisionLaunchesTheThreeProductKernelsAndKeepsFp32Attention() {
        CudaTensorOps ops = new CudaTensorOps(device, Precision.TF32X3, false);
        ops.linear(stream, 0x1000, 0x2000, 0x2800, 0x3000, 128, 768, 768, Activation.NONE);
        ops.linear(stream, 0x1000, 0x2000, 0x2800, 0x3000, 16384, 768, 3072, Activation.GELU);
        ops.linear(stream, 0x1000, 0x2000, 0x2800, 0x3000, 4, 5, 6, Activation.NONE);
        ops.attention(stream, 0x4000, 0, 0, 0x5000, 2, 128, 12, 64);
        assertThat(stream.launches).extracting(Launch::kernel)
                .containsExactly("gemm_tc_tf32x3_64", "gemm_tc_tf32x3_128", "gemm_f32", "attention_d64_tiled");
        assertThat(stream.launches.get(0).block()).containsExactly(128, 1, 1);
        assertThat(stream.launches.get(1).grid()).containsExactly(24, 128, 1);
        assertThat(stream.launches.get(1).block()).containsExactly(256, 1, 1);
    }

    @Test
    void splitKIsOnUnlessTheSystemPropertyTurnsItOff() {
        assertThat(new CudaTensorOps(device).splitK()).isEqualTo(CudaTensorOps.SPLIT_K_DEFAULT);
        assertThat(CudaTensorOps.SPLIT_K_DEFAULT)
                .isEqualTo(!"false".equalsIgnoreCase(System.getProperty("gpupool.kernels.splitK")));
        assertThat(new CudaTensorOps(device, Precision.TF32, false).splitK()).isFalse();
    }

    @Test
    void fewTileFp32ProductIsSplitAlongKWithBiasInitAndNoActivationPass() {
        CudaTensorOps ops = new CudaTensorOps(device, Precision.FP32, true);
        // BERT-base FFN output at batch 1 x seq 128: 6 tiles of 128x128; 16 slices of 192 (K 3072).
        ops.linear(stream, 0x1000, 0x2000, 0x2800, 0x3000, 128, 3072, 768, Activation.NONE);
        assertThat(stream.launches).extracting(Launch::kernel).containsExactly("gemm_splitk_init", "gemm_f32_splitk");
        Launch init = stream.launches.get(0);
        assertThat(init.grid()).containsExactly(384, 1, 1);
        assertThat(init.block()).containsExactly(256, 1, 1);
        assertThat(init.arguments()).containsExactly(0x2800L, 0x3000L, 128, 768);
        Launch gemm = stream.launches.get(1);
        assertThat(gemm.grid()).containsExactly(6, 1, 16);
        assertThat(gemm.block()).containsExactly(256, 1, 1);
        assertThat(gemm.arguments()).containsExactly(0x1000L, 0x2000L, 0x3000L, 128, 768, 3072, 192);
    }

    @Test
    void splitProductWithAnActivationEndsWithTheInPlaceActivationPass() {
        CudaTensorOps ops = new CudaTensorOps(device, Precision.TF32, true);
        // FFN input at 1 x 128: 48 x 2 tiles of 64x64 on the tensor cores, 264 / 96 -> 2 slices of 384.
        ops.linear(stream, 0x1000, 0x2000, 0, 0x3000, 128, 768, 3072, Activation.GELU);
        assertThat(stream.launches).extracting(Launch::kernel)
                .containsExactly("gemm_splitk_init", "gemm_tc_tf32_64_splitk", "gemm_splitk_act");
        assertThat(stream.launches.get(0).arguments()).containsExactly(0L, 0x3000L, 128, 3072);
        assertThat(stream.launches.get(0).grid()).containsExactly(1024, 1, 1);
        assertThat(stream.launches.get(1).grid()).containsExactly(48, 2, 2);
        assertThat(stream.launches.get(1).block()).containsExactly(128, 1, 1);
        assertThat(stream.launches.get(1).arguments()).containsExactly(0x1000L, 0x2000L, 0x3000L, 128, 3072, 768, 384);
        assertThat(stream.launches.get(2).arguments()).containsExactly(0x3000L, 128, 3072, Activation.GELU.ordinal());
    }

    @Test
    void splitKernelFollowsThePrecisionAndInnerSizesNotAMultipleOf4UseTheFp32One() {
        new CudaTensorOps(device, Precision.TF32X3, true)
                .linear(stream, 0x1000, 0x2000, 0, 0x3000, 128, 768, 768, Activation.NONE);
        new CudaTensorOps(device, Precision.BF16, true)
                .linear(stream, 0x1000, 0x2000, 0, 0x3000, 128, 768, 768, Activation.NONE);
        new CudaTensorOps(device, Precision.TF32, true)
                .linear(stream, 0x1000, 0x2000, 0, 0x3000, 128, 766, 768, Activation.NONE);
        assertThat(stream.launches).extracting(Launch::kernel).containsExactly(
                "gemm_splitk_init", "gemm_tc_tf32x3_64_splitk",
                "gemm_splitk_init", "gemm_tc_bf16_64_splitk",
                "gemm_splitk_init", "gemm_f32_splitk");
        // 766 = 5 slices of 160 (the last 126 long).
        assertThat(stream.launches.get(5).grid()).containsExactly(6, 1, 5);
        assertThat(stream.launches.get(5).arguments().getLast()).isEqualTo(160);
    }

    @Test
    void productsWithEnoughTilesOrAShortInnerSizeAreNotSplit() {
        CudaTensorOps fp32 = new CudaTensorOps(device, Precision.FP32, true);
        CudaTensorOps tf32 = new CudaTensorOps(device, Precision.TF32, true);
        fp32.linear(stream, 0x1000, 0x2000, 0, 0x3000, 16384, 3072, 768, Activation.NONE);   // 768 tiles
        tf32.linear(stream, 0x1000, 0x2000, 0, 0x3000, 1024, 768, 3072, Activation.NONE);    // 768 small tiles
        fp32.linear(stream, 0x1000, 0x2000, 0, 0x3000, 4, 200, 6, Activation.NONE);          // K < 2 slices
        assertThat(stream.launches).extracting(Launch::kernel)
                .containsExactly("gemm_f32", "gemm_tc_tf32_64", "gemm_f32");
        assertThat(GemmKernels.splitSlices(GemmKernels.SPLIT_K_TARGET_BLOCKS, 100_000)).isEqualTo(1);
        assertThat(GemmKernels.splitSlices(1, 100_000)).isEqualTo(GemmKernels.SPLIT_K_MAX);
        assertThat(GemmKernels.splitSlices(48, 3072)).isEqualTo(5);   // FP32 at 8 x 128: 264 / 48
    }

    @Test
    void tensorCoreLinearFallsBackToFp32ForAnInnerSizeNotAMultipleOf4() {
        CudaTensorOps ops = new CudaTensorOps(device, Precision.TF32);
        ops.linear(stream, 0x1000, 0x2000, 0, 0x3000, 4096, 767, 4096, Activation.NONE);
        ops.linear(stream, 0x1000, 0x2000, 0, 0x3000, 4096, 768, 4096, Activation.NONE);
        assertThat(stream.launches).extracting(Launch::kernel).containsExactly("gemm_f32", "gemm_tc_tf32_128");
    }

    @Test
    void misalignedLinearOperandsAreRejected() {
        CudaTensorOps ops = new CudaTensorOps(device, Precision.TF32);
        assertThatThrownBy(() -> ops.linear(stream, 0x1004, 0x2000, 0, 0x3000, 8, 8, 8, Activation.NONE))
                .isInstanceOf(IllegalArgumentException.class).hasMessage("x must be 16-byte aligned, got 0x1004");
        assertThatThrownBy(() -> ops.linear(stream, 0x1000, 0x2000, 0, 0x3008, 8, 8, 8, Activation.NONE))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("y must be 16-byte aligned");
        assertThat(stream.launches).isEmpty();
    }

    @Test
    void attentionPicksTheKernelByHeadSizeAndPrecision() {
        CudaTensorOps fp32 = new CudaTensorOps(device, Precision.FP32, null, null, KernelOptions.DEFAULT,
                AttentionKernels.CLASSIC);
        CudaTensorOps bf16 = new CudaTensorOps(device, Precision.BF16);
        fp32.attention(stream, 0x1000, 0, 0, 0x2000, 8, 100, 12, 64);
        fp32.attention(stream, 0x1000, 0, 0, 0x2000, 8, 100, 2, 8);
        fp32.attention(stream, 0x1000, 0, 0, 0x2000, 8, 100, 2, 96);
        bf16.attention(stream, 0x1000, 0x1800, 0, 0x2000, 8, 100, 12, 64);
        bf16.attention(stream, 0x1000, 0, 0, 0x2000, 8, 100, 2, 32);
        assertThat(stream.launches).extracting(Launch::kernel).containsExactly("attention_d64", "attention_d32",
                "attention_d128", "attention_bf16_d64", "attention_d32");
        assertThat(stream.launches.get(0).grid()).containsExactly(4, 12, 8);
        assertThat(stream.launches.get(0).arguments()).containsExactly(0x1000L, 0L, 0x2000L, 100, 12, 64);
        assertThat(stream.launches.get(3).grid()).containsExactly(2, 12, 8);
        assertThat(stream.launches.get(3).arguments()).containsExactly(0x1000L, 0x1800L, 0x2000L, 100, 12);
        assertThatThrownBy(() -> fp32.attention(stream, 0x1000, 0, 0, 0x2000, 1, 4, 1, 256))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("headDim 256");
        assertThat(fp32.attentionWorkspaceBytes(32, 512, 12, 64)).isZero();
    }

    @Test
    void tiledAttentionRunsTheRegisterTiledFp32KernelForAlignedHeadSize64() {
        CudaTensorOps fp32 = new CudaTensorOps(device, Precision.FP32, null, null, KernelOptions.DEFAULT,
                AttentionKernels.TILED);
        CudaTensorOps x3 = new CudaTensorOps(device, Precision.TF32X3, null, null, KernelOptions.DEFAULT,
                AttentionKernels.TILED);
        fp32.attention(stream, 0x1000, 0x1800, 0, 0x2000, 8, 100, 12, 64);
        x3.attention(stream, 0x1000, 0, 0, 0x2000, 8, 100, 12, 64);
        fp32.attention(stream, 0x1008, 0, 0, 0x2000, 8, 100, 12, 64);   // misaligned qkv: the classic kernel
        fp32.attention(stream, 0x1000, 0, 0, 0x2004, 8, 100, 12, 64);   // misaligned context: likewise
        fp32.attention(stream, 0x1000, 0, 0, 0x2000, 8, 100, 2, 32);
        assertThat(stream.launches).extracting(Launch::kernel).containsExactly("attention_d64_tiled",
                "attention_d64_tiled", "attention_d64", "attention_d64", "attention_d32");
        assertThat(stream.launches.getFirst().grid()).containsExactly(2, 12, 8);
        assertThat(stream.launches.getFirst().block()).containsExactly(128, 1, 1);
        assertThat(stream.launches.getFirst().arguments()).containsExactly(0x1000L, 0x1800L, 0x2000L, 100, 12);
        String property = System.getProperty("gpupool.kernels.attention");
        assertThat(new CudaTensorOps(device).attentionKernels()).as("the default")
                .isEqualTo(property == null ? AttentionKernels.TILED : CudaTensorOps.attentionKernels(property));
    }

    @Test
    void attentionKernelsParseInAnyCaseAndAnUnknownNameIsRejectedWithTheChoices() {
        assertThat(CudaTensorOps.attentionKernels("tiled")).isEqualTo(AttentionKernels.TILED);
        assertThat(CudaTensorOps.attentionKernels(" Classic ")).isEqualTo(AttentionKernels.CLASSIC);
        assertThatThrownBy(() -> CudaTensorOps.attentionKernels("flash"))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessage("gpupool.kernels.attention = flash is invalid; allowed: CLASSIC, TILED");
    }

    @Test
    void tf32PrecisionUsesTheTf32TensorCoreAttentionForHeadSize64UnlessTurnedOff() {
        CudaTensorOps tf32 = new CudaTensorOps(device, Precision.TF32, true, true);
        CudaTensorOps off = new CudaTensorOps(device, Precision.TF32, true, false);
        CudaTensorOps x3 = new CudaTensorOps(device, Precision.TF32X3, true, true);
        tf32.attention(stream, 0x1000, 0x1800, 0, 0x2000, 8, 100, 12, 64);
        tf32.attention(stream, 0x1000, 0, 0, 0x2000, 8, 100, 2, 32);
        tf32.attention(stream, 0x1008, 0, 0, 0x2000, 8, 100, 12, 64);   // misaligned qkv: FP32 kernel
        off.attention(stream, 0x1000, 0, 0, 0x2000, 8, 100, 12, 64);
        x3.attention(stream, 0x1000, 0, 0, 0x2000, 8, 100, 12, 64);
        assertThat(stream.launches).extracting(Launch::kernel).containsExactly("attention_tf32_d64", "attention_d32",
                "attention_d64", "attention_d64_tiled", "attention_d64_tiled");
        assertThat(stream.launches.getFirst().grid()).containsExactly(2, 12, 8);
        assertThat(stream.launches.getFirst().block()).containsExactly(128, 1, 1);
        assertThat(stream.launches.getFirst().arguments()).containsExactly(0x1000L, 0x1800L, 0x2000L, 100, 12);
        assertThat(new CudaTensorOps(device, Precision.TF32).tf32Attention())
                .isEqualTo(!"false".equalsIgnoreCase(System.getProperty("gpupool.kernels.tf32Attention")));
    }

    @Test
    void rowKernelsGetOneBlockPerRow() {
        CudaTensorOps ops = new CudaTensorOps(device);
        ops.addLayerNorm(stream, 0x1000, 0, 0x2000, 0x3000, 0x1000, 77, 770, 1e-12f);   // not whole warp chunks
        ops.pool(stream, 0x1000, 0x4000, 0x5000, 3, 16, 768, Pooling.MEAN);
        ops.pool(stream, 0x1000, 0, 0x5000, 3, 16, 768, Pooling.CLS);
        ops.softmax(stream, 0x1000, 0x1000, 5, 10);
        ops.embeddingSum(stream, 0x100, 0, 0x1000, 0x2000, 0x3000, 0x4000, 3, 16, 768);
        assertThat(stream.launches).extracting(Launch::kernel)
                .containsExactly("add_layer_norm", "pool_mean", "pool_cls", "softmax_rows", "embedding_sum");
        assertThat(stream.launches).extracting(l -> l.grid()[0]).containsExactly(77, 3, 3, 5, 48);
        assertThat(stream.launches.get(0).arguments()).containsExactly(0x1000L, 0L, 0x2000L, 0x3000L, 0x1000L, 770,
                1e-12f);
        assertThat(stream.launches.get(3).block()).containsExactly(32, 1, 1);
    }

    @Test
    void badArgumentsAreRejectedWithTheirName() {
        CudaTensorOps ops = new CudaTensorOps(device);
        assertThatThrownBy(() -> ops.linear(stream, 0x1000, 0x2000, 0, 0x3000, 0, 4, 4, Activation.NONE))
                .isInstanceOf(IllegalArgumentException.class).hasMessage("rows must be positive, got 0");
        assertThatThrownBy(() -> ops.linear(stream, 0x1000, 0, 0, 0x3000, 4, 4, 4, Activation.NONE))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("weight");
        assertThatThrownBy(() -> ops.addLayerNorm(stream, 0x1000, 0, 0x2000, 0x3000, 0x1000, 1, 8, 0f))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("eps");
        assertThat(stream.launches).isEmpty();
    }

    @Test
    void packedSequenceOpsLaunchOneBlockPerTokenSequenceAndHeadOnlyWhereAttentionIsFp32() {
        CudaTensorOps ops = new CudaTensorOps(device, Precision.FP32);
        assertThat(ops.supportsPackedSequences(64)).isTrue();
        assertThat(ops.supportsPackedSequences(256)).as("above varlen_attention's shared tile").isFalse();
        assertThat(new CudaTensorOps(device, Precision.BF16).supportsPackedSequences(64)).isFalse();
        assertThat(new CudaTensorOps(device, Precision.TF32X3).supportsPackedSequences(64)).isTrue();

        ops.packedEmbeddingSum(stream, 0x1000, 0, 0x2000, 0x3000, 0x4000, 0x5000, 0x6000, 70, 768);
        ops.varlenAttention(stream, 0x1000, 0x2000, 0x3000, 0x4000, 5, 70, 30, 12, 64);
        ops.packedPool(stream, 0x1000, 0, 0x3000, 0x4000, 5, 70, 768, Pooling.CLS);
        ops.packedPool(stream, 0x1000, 0x2000, 0x3000, 0x4000, 5, 70, 768, Pooling.MEAN);

        assertThat(stream.launches).extracting(Launch::kernel).containsExactly("packed_embedding_sum",
                "varlen_attention", "packed_pool_cls", "packed_pool_mean");
        assertThat(stream.launches.get(0).grid()).containsExactly(70, 1, 1);
        assertThat(stream.launches.get(0).arguments()).containsExactly(0x1000L, 0L, 0x2000L, 0x3000L, 0x4000L,
                0x5000L, 0x6000L, 768);
        assertThat(stream.launches.get(1).grid()).containsExactly(5, 12, 1);
        assertThat(stream.launches.get(1).block()).containsExactly(128, 1, 1);
        assertThat(stream.launches.get(1).arguments()).containsExactly(0x1000L, 0x2000L, 0x3000L, 0x4000L, 12, 64,
                0.125f);
        assertThat(stream.launches.get(2).grid()).containsExactly(5, 1, 1);
        assertThat(stream.launches.get(3).arguments()).containsExactly(0x1000L, 0x2000L, 0x3000L, 0x4000L, 768);
    }

    // --- fakes ---------------------------------------------------------------------------------------------------

    record Function(String name) implements KernelFunction {
    }

    static final class RecordingDevice implements ComputeDevice {
        final List<String> modules = new ArrayList<>();

        @Override
        public KernelModule loadModule(String name, byte[] image) {
            String text = new String(image, java.nio.charset.StandardCharsets.US_ASCII);
            modules.add(name);
            return kernel -> {
                if (!text.contains(".visible .entry " + kernel + "(")) {
                    throw new IllegalArgumentException("no kernel " + kernel + " in module " + name);
                }
                return new Function(kernel);
            };
        }

        @Override public int index() { return 0; }
        @Override public String name() { return "recording"; }
        @Override public long totalMemory() { return 0; }
        @Override public long freeMemory() { return 0; }
        @Override public ChunkSource chunkSource() { throw new UnsupportedOperationException(); }
        @Override public Optional<DeviceAllocator> nativeAllocator(AllocatorMode mode) { return Optional.empty(); }
        @Override public DeviceStream createStream(int ordinal) { return new RecordingStream(this, ordinal); }
        @Override public void bindToCurrentThread() { }
    }

    static final class RecordingStream implements DeviceStream {
        final List<Launch> launches = new ArrayList<>();
        private final ComputeDevice device;
        private final int ordinal;
        /** What {@link #capturing()} answers: a test sets it to play a graph capture. */
        volatile boolean capturing;

        RecordingStream(ComputeDevice device) {
            this(device, 0);
        }

        RecordingStream(ComputeDevice device, int ordinal) {
            this.device = device;
            this.ordinal = ordinal;
        }

        Launch only() {
            assertThat(launches).hasSize(1);
            return launches.getFirst();
        }

        @Override
        public void launch(KernelFunction function, int gridX, int gridY, int gridZ, int blockX, int blockY,
                           int blockZ, int sharedMemoryBytes, Object... arguments) {
            launches.add(new Launch(function.name(), new int[] {gridX, gridY, gridZ},
                    new int[] {blockX, blockY, blockZ}, List.of(arguments)));
        }

        @Override public ComputeDevice device() { return device; }
        @Override public int ordinal() { return ordinal; }
        @Override public boolean capturing() { return capturing; }
        @Override public StreamFence recordFence() { return StreamFence.completed(); }
        @Override public void copyHostToDevice(MemorySegment source, long deviceAddress, long bytes) { }
        @Override public void copyDeviceToHost(long deviceAddress, MemorySegment destination, long bytes) { }
        @Override public void copyDeviceToDevice(long sourceAddress, long destinationAddress, long bytes) { }
        @Override public void fill(long deviceAddress, byte value, long bytes) { }
        @Override public void enqueueHostTask(Runnable task) { task.run(); }
        @Override public void synchronize() { }
        @Override public void close() { }
    }
}
