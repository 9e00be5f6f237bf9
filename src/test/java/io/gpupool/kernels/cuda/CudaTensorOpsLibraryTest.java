package io.gpupool.kernels.cuda;

import io.gpupool.backend.DeviceStream;
import io.gpupool.backend.MatmulLibrary;
import io.gpupool.kernels.TensorOps.Activation;
import io.gpupool.kernels.TensorOps.Pooling;
import io.gpupool.kernels.cuda.CudaTensorOpsLaunchTest.Launch;
import io.gpupool.kernels.cuda.CudaTensorOpsLaunchTest.RecordingDevice;
import io.gpupool.kernels.cuda.CudaTensorOpsLaunchTest.RecordingStream;
import io.gpupool.serving.fake.CountingAllocator;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * How {@link CudaTensorOps} uses a {@link MatmulLibrary}, checked without a GPU against a library that records
 * plans and runs: which epilogue each precision and activation gets (and when an extra activation pass follows),
 * that the heuristic is asked once per shape and stream, that each stream's workspace is one pool block at a fixed
 * address given back on close, where gpupool's kernels take over, and which kernels run on bf16 activations.
 */
class CudaTensorOpsLibraryTest {

    record Plan(int rows, int in, int out, MatmulLibrary.ElementType type, MatmulLibrary.Compute compute,
                MatmulLibrary.Epilogue epilogue) {
    }

    record Run(Plan plan, DeviceStream stream, long x, long w, long bias, long residual, long y, long workspace) {
    }

    /**
     * Records plans and runs; declines shapes with {@code out == 3} as a library without an algorithm would. A plan's
     * algorithm needs 64 bytes of workspace per output feature. Safe for several streams' threads at once, as the
     * real library is (a device worker plans and runs products on all its streams together).
     */
    static final class RecordingLibrary implements MatmulLibrary {
        final List<Plan> plans = Collections.synchronizedList(new ArrayList<>());
        final List<Run> runs = Collections.synchronizedList(new ArrayList<>());
        final Map<Matmul, Plan> planned = Collections.synchronizedMap(new IdentityHashMap<>());
        private final AtomicInteger closedPlans = new AtomicInteger();
        /** Plans closed so far (read once the products are done). */
        volatile int closed;

        @Override
        public long workspaceBytes(Matmul plan) {
            return 64L * planned.get(plan).out();
        }

        @Override
        public String description() {
            return "fakeLt 1.0";
        }

        @Override
        public long workspaceBytes() {
            return 1 << 20;
        }

        /** Plans made by {@link #planResidual}. */
        final List<Plan> residualPlans = Collections.synchronizedList(new ArrayList<>());

        @Override
        public Matmul plan(int rows, int in, int out, ElementType type, Compute compute, Epilogue epilogue) {
            return record(rows, in, out, type, compute, epilogue, false);
        }

        @Override
        public Matmul planResidual(int rows, int in, int out, ElementType type, Compute compute, Epilogue epilogue) {
            return record(rows, in, out, type, compute, epilogue, true);
        }

        private Matmul record(int rows, int in, int out, ElementType type, Compute compute, Epilogue epilogue,
                              boolean residual) {
            if (out == 3) {
                throw new IllegalStateException("cublasLtMatmulAlgoGetHeuristic failed: CUBLAS_STATUS_NOT_SUPPORTED");
            }
            Plan plan = new Plan(rows, in, out, type, compute, epilogue);
            (residual ? residualPlans : plans).add(plan);
            Matmul matmul = new Matmul() {
                @Override
                public void run(DeviceStream stream, long x, long w, long bias, long residualAddress, long y,
                                long workspace) {
                    if (residual != (residualAddress != 0)) {
                        throw new IllegalArgumentException("residual " + residualAddress + " for a plan "
                                + (residual ? "with" : "without") + " one");
                    }
                    runs.add(new Run(plan, stream, x, w, bias, residualAddress, y, workspace));
                }

                @Override
                public void close() {
                    closed = closedPlans.incrementAndGet();
                }
            };
            planned.put(matmul, plan);
            return matmul;
        }
    }

    private final RecordingDevice device = new RecordingDevice();
    private final RecordingStream stream = new RecordingStream(device);
    private final RecordingLibrary library = new RecordingLibrary();
    private final CountingAllocator pool = new CountingAllocator(1L << 30);

    @Test
    void fp32KeepsTheExactGeluAsASecondPassAndFusesTheBias() {
        CudaTensorOps ops = new CudaTensorOps(device, Precision.FP32, library, pool);
        ops.linear(stream, 0x1000, 0x2000, 0x3000, 0x4000, 128, 768, 3072, Activation.GELU);
        assertThat(library.plans).containsExactly(new Plan(128, 768, 3072, MatmulLibrary.ElementType.FP32,
                MatmulLibrary.Compute.FP32, MatmulLibrary.Epilogue.BIAS));
        assertThat(stream.launches).extracting(Launch::kernel).containsExactly("gemm_splitk_act");
        assertThat(stream.launches.getFirst().arguments()).containsExactly(0x4000L, 128, 3072,
                Activation.GELU.ordinal());
        assertThat(ops.gemmEngine()).isEqualTo("fakeLt 1.0");
        assertThat(ops.activationBytes()).isEqualTo(4);
    }

    @Test
    void tensorCorePrecisionsFuseBiasAndGeluAndTanhGetAPass() {
        CudaTensorOps tf32 = new CudaTensorOps(device, Precision.TF32, library, pool);
        tf32.linear(stream, 0x1000, 0x2000, 0x3000, 0x4000, 64, 768, 3072, Activation.GELU);
        tf32.linear(stream, 0x1000, 0x2000, 0x3000, 0x4000, 64, 768, 768, Activation.RELU);
        tf32.linear(stream, 0x1000, 0x2000, 0, 0x4000, 64, 768, 768, Activation.NONE);
        tf32.linear(stream, 0x1000, 0x2000, 0x3000, 0x4000, 8, 768, 768, Activation.TANH);
        assertThat(library.plans).extracting(Plan::epilogue).containsExactly(MatmulLibrary.Epilogue.BIAS_GELU,
                MatmulLibrary.Epilogue.BIAS_RELU, MatmulLibrary.Epilogue.NONE, MatmulLibrary.Epilogue.BIAS);
        assertThat(library.plans).extracting(Plan::compute).containsOnly(MatmulLibrary.Compute.TF32);
        assertThat(stream.launches).extracting(Launch::kernel).containsExactly("gemm_splitk_act");
    }

    @Test
    void aShapeIsPlannedOncePerStreamAndEachStreamHasOneFixedWorkspaceFromThePool() {
        CudaTensorOps ops = new CudaTensorOps(device, Precision.BF16, library, pool);
        RecordingStream other = new RecordingStream(device);
        for (int i = 0; i < 3; i++) {
            ops.linear(stream, 0x1000, 0x2000, 0x3000, 0x4000, 128, 768, 2304, Activation.NONE);
        }
        ops.linear(other, 0x1000, 0x2000, 0x3000, 0x4000, 128, 768, 2304, Activation.NONE);
        assertThat(library.plans).hasSize(2);   // once for each stream
        assertThat(library.runs).hasSize(4);
        assertThat(library.runs.subList(0, 3)).extracting(Run::workspace).containsOnly(library.runs.getFirst().workspace());
        assertThat(library.runs.get(3).workspace()).isNotEqualTo(library.runs.getFirst().workspace());
        assertThat(pool.allocatedBytes.get()).isEqualTo(2 * library.workspaceBytes());
        assertThat(ops.workspaceBytesHeld()).isEqualTo(2 * library.workspaceBytes());

        ops.close();
        assertThat(pool.allocatedBytes.get()).isZero();
        assertThat(library.closed).isEqualTo(2);
    }

    @Test
    void aPinnedWorkspaceServesItsStreamWithoutAPoolBlockAndMustCoverWhatItsPlansNeed() {
        CudaTensorOps ops = new CudaTensorOps(device, Precision.BF16, library, pool);
        RecordingStream capturing = new RecordingStream(device);
        assertThat(ops.workspaceBound()).isEqualTo(library.workspaceBytes());

        // warm-up: the whole bound, pinned; the stream never gets a pool block of its own
        ops.useWorkspace(capturing, 0x100000, ops.workspaceBound());
        ops.linear(capturing, 0x1000, 0x2000, 0x3000, 0x4000, 128, 768, 2304, Activation.NONE);
        ops.linear(capturing, 0x1000, 0x2000, 0x3000, 0x4000, 128, 768, 3072, Activation.GELU);
        assertThat(library.runs).extracting(Run::workspace).containsOnly(0x100000L);
        assertThat(pool.allocatedBytes.get()).isZero();
        assertThat(ops.workspaceBytesHeld()).isZero();
        assertThat(ops.workspaceNeeded(capturing)).as("the larger plan's need").isEqualTo(64L * 3072);

        // a graph's own workspace of exactly that size serves the same products, planned no second time
        ops.useWorkspace(capturing, 0x200000, ops.workspaceNeeded(capturing));
        ops.linear(capturing, 0x1000, 0x2000, 0x3000, 0x4000, 128, 768, 3072, Activation.GELU);
        assertThat(library.runs.getLast().workspace()).isEqualTo(0x200000L);
        assertThat(library.plans).hasSize(2);

        // the need is that of the products run since the last pin, not of every plan the stream holds
        ops.useWorkspace(capturing, 0x100000, ops.workspaceBound());
        ops.linear(capturing, 0x1000, 0x2000, 0x3000, 0x4000, 128, 768, 2304, Activation.NONE);
        assertThat(ops.workspaceNeeded(capturing)).isEqualTo(64L * 2304);

        ops.useWorkspace(capturing, 0x300000, 1024);
        assertThatThrownBy(() -> ops.linear(capturing, 0x1000, 0x2000, 0x3000, 0x4000, 128, 768, 3072,
                Activation.GELU)).isInstanceOf(IllegalStateException.class)
                .hasMessageContaining("1024 bytes").hasMessageContaining("needs " + 64L * 3072);
        ops.useWorkspace(capturing, 0, 0);
        assertThatThrownBy(() -> ops.linear(capturing, 0x1000, 0x2000, 0x3000, 0x4000, 128, 768, 3072,
                Activation.GELU)).isInstanceOf(IllegalStateException.class).hasMessageContaining("withdrawn");
        assertThatThrownBy(() -> ops.useWorkspace(capturing, 0x100010, 4096))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("256-byte aligned");
        assertThat(pool.allocatedBytes.get()).as("still no pool block for the capture stream").isZero();

        ops.linear(stream, 0x1000, 0x2000, 0x3000, 0x4000, 128, 768, 2304, Activation.NONE);
        assertThat(pool.allocatedBytes.get()).as("a serving stream gets its own").isEqualTo(library.workspaceBytes());
        ops.close();
        assertThat(pool.allocatedBytes.get()).isZero();
        assertThat(library.closed).isEqualTo(3);
    }

    @Test
    void unalignedOperandsAndDeclinedShapesRunOnGpupoolsKernels() {
        CudaTensorOps fp32 = new CudaTensorOps(device, Precision.FP32, library, pool);
        fp32.linear(stream, 0x1010, 0x2000, 0x3000, 0x4000, 300, 768, 200, Activation.NONE);   // x 16-aligned only
        fp32.linear(stream, 0x1000, 0x2000, 0x3000, 0x4000, 300, 768, 3, Activation.NONE);     // declined
        fp32.linear(stream, 0x1000, 0x2000, 0x3000, 0x4000, 300, 768, 3, Activation.NONE);     // remembered
        assertThat(library.runs).isEmpty();
        // few output tiles: gpupool's FP32 split-K (init + split kernel) for each of the three
        assertThat(stream.launches).extracting(Launch::kernel).containsOnly("gemm_splitk_init", "gemm_f32_splitk");
        assertThat(stream.launches).hasSize(6);

        stream.launches.clear();
        CudaTensorOps bf16 = new CudaTensorOps(device, Precision.BF16, library, pool);
        bf16.linear(stream, 0x1000, 0x2000, 0x3000, 0x4000, 8, 768, 3, Activation.NONE);
        assertThat(stream.only().kernel()).isEqualTo("linear_bf16_warp");
        assertThat(stream.only().grid()).containsExactly(3, 1, 1);   // 24 outputs, 8 warps a block
    }

    @Test
    void bf16ActivationsRouteEveryOpToItsBf16KernelAndWidenOutputs() {
        CudaTensorOps ops = new CudaTensorOps(device, Precision.BF16, library, pool);
        assertThat(ops.activationBytes()).isEqualTo(2);
        ops.linear(stream, 0x1000, 0x2000, 0x3000, 0x4000, 128, 768, 3072, Activation.GELU);
        assertThat(library.plans.getFirst().type()).isEqualTo(MatmulLibrary.ElementType.BF16);
        assertThat(library.plans.getFirst().epilogue()).isEqualTo(MatmulLibrary.Epilogue.BIAS_GELU);
        ops.embeddingLayerNorm(stream, 0x100, 0, 0x200, 0x300, 0x400, 0x500, 0x600, 0x700, 2, 128, 768, 1e-12f);
        ops.addLayerNorm(stream, 0x100, 0x200, 0x300, 0x400, 0x500, 256, 768, 1e-12f);
        ops.attention(stream, 0x100, 0x200, 0, 0x300, 2, 128, 12, 64);
        ops.pool(stream, 0x100, 0x200, 0x300, 2, 128, 768, Pooling.MEAN);
        ops.pool(stream, 0x100, 0, 0x300, 2, 128, 768, Pooling.CLS);
        ops.linear(stream, 0x1000, 0x2000, 0x3000, 0x4000, 2, 768, 768, Activation.TANH);
        ops.toFloat32(stream, 0x100, 0x200, 1536);
        assertThat(stream.launches).extracting(Launch::kernel).containsExactly("embedding_layer_norm_warp_bf16",
                "add_layer_norm_warp_bf16", "flash_attention_bf16io_d64_q64", "pool_mean_bf16", "pool_cls_bf16", "activate_bf16",
                "bf16_to_f32");
        assertThat(ops.launches()).isEqualTo(9);   // 7 kernels and 2 library calls

        stream.launches.clear();
        ops.addLayerNorm(stream, 0x100, 0x200, 0x300, 0x400, 0x500, 4, 4096, 1e-12f);   // 16 columns a thread
        assertThat(stream.only().kernel()).isEqualTo("add_layer_norm_bf16");

        stream.launches.clear();
        assertThat(ops.attentionWorkspaceBytes(2, 10, 2, 16)).isEqualTo(4L * 2 * 10 * 2 * 16 * 4);
        ops.attention(stream, 0x100, 0x200, 0x10000, 0x300, 2, 10, 2, 16);
        assertThat(stream.launches).extracting(Launch::kernel).containsExactly("bf16_to_f32", "attention_d32",
                "f32_to_bf16");
    }

    @Test
    void tiledAttentionOnBf16ActivationsRunsFlashAttentionWith128QueryBlocksWhereTheyAreEnough() {
        CudaTensorOps ops = new CudaTensorOps(device, Precision.BF16, library, pool, KernelOptions.DEFAULT,
                AttentionKernels.TILED);
        ops.attention(stream, 0x100, 0x200, 0, 0x300, 32, 512, 12, 64);   // 4·12·32 = 1536 blocks of 128 queries
        ops.attention(stream, 0x100, 0x200, 0, 0x300, 1, 512, 12, 64);    // 48 blocks of 128: too few, 64 instead
        ops.attention(stream, 0x100, 0, 0, 0x300, 8, 100, 12, 64);        // 96 blocks of 128: just enough
        assertThat(stream.launches).extracting(Launch::kernel).containsExactly("flash_attention_bf16io_d64_q128w8",
                "flash_attention_bf16io_d64_q64", "flash_attention_bf16io_d64_q128w8");
        assertThat(stream.launches).extracting(Launch::grid).containsExactly(new int[] {4, 12, 32},
                new int[] {8, 12, 1}, new int[] {1, 12, 8});
        assertThat(stream.launches).extracting(Launch::block).containsExactly(new int[] {256, 1, 1},
                new int[] {128, 1, 1}, new int[] {256, 1, 1});
        assertThat(stream.launches.getFirst().arguments()).containsExactly(0x100L, 0x200L, 0x300L, 512, 12);
        assertThat(stream.launches.get(2).arguments()).containsExactly(0x100L, 0L, 0x300L, 100, 12);

        stream.launches.clear();
        ops.attention(stream, 0x100, 0x200, 0x10000, 0x300, 2, 10, 2, 16);   // other head sizes: as before
        assertThat(stream.launches).extracting(Launch::kernel).containsExactly("bf16_to_f32", "attention_d32",
                "f32_to_bf16");
        assertThat(ops.attentionKernels()).isEqualTo(AttentionKernels.TILED);
    }

    @Test
    void withoutALibraryBf16KeepsFp32ActivationsAndTheOwnKernels() {
        CudaTensorOps ops = new CudaTensorOps(device, Precision.BF16, null, null);
        assertThat(ops.activationBytes()).isEqualTo(4);
        assertThat(ops.gemmEngine()).isEqualTo(GemmEngine.OWN_NAME);
        assertThat(ops.fp32Activations()).isSameAs(ops);
        ops.linear(stream, 0x1000, 0x2000, 0x3000, 0x4000, 16384, 768, 3072, Activation.GELU);
        assertThat(stream.only().kernel()).isEqualTo("gemm_tc_bf16_128");

        CudaTensorOps resident = new CudaTensorOps(device, Precision.BF16, library, pool);
        assertThat(resident.fp32Activations().activationBytes()).isEqualTo(4);
        assertThat(((CudaTensorOps) resident.fp32Activations()).gemmEngine()).isEqualTo(GemmEngine.OWN_NAME);
    }

    @Test
    void tf32x3HasNoLibraryEquivalentAndKeepsItsKernels() {
        CudaTensorOps ops = new CudaTensorOps(device, Precision.TF32X3, library, pool);
        ops.linear(stream, 0x1000, 0x2000, 0x3000, 0x4000, 16384, 768, 3072, Activation.NONE);
        assertThat(library.plans).isEmpty();
        assertThat(stream.only().kernel()).isEqualTo("gemm_tc_tf32x3_128");
        assertThat(ops.gemmEngine()).isEqualTo(GemmEngine.OWN_NAME);
        assertThat(pool.allocatedBytes.get()).isZero();
    }

    private static final KernelOptions RESIDUAL = new KernelOptions(false, true, false);
    private static final KernelOptions WARP_NORM = new KernelOptions(false, false, true);

    @Test
    void residualInGemmAddsTheResidualInTheProductAndNormalisesInPlace() {
        CudaTensorOps ops = new CudaTensorOps(device, Precision.BF16, library, pool, RESIDUAL);
        ops.linearAddLayerNorm(stream, 0x1000, 0x2000, 0x3000, 0x4000, 0x5000, 0x6000, 0x7000, 256, 3072, 768, 1e-12f);

        assertThat(library.plans).isEmpty();
        assertThat(library.residualPlans).containsExactly(new Plan(256, 3072, 768, MatmulLibrary.ElementType.BF16,
                MatmulLibrary.Compute.BF16, MatmulLibrary.Epilogue.BIAS));
        Run run = library.runs.getFirst();
        assertThat(List.of(run.x(), run.w(), run.bias(), run.residual(), run.y()))
                .containsExactly(0x1000L, 0x2000L, 0x3000L, 0x4000L, 0x7000L);
        Launch norm = stream.only();
        assertThat(norm.kernel()).isEqualTo("add_layer_norm_bf16_reg");
        assertThat(norm.arguments()).containsExactly(0x7000L, 0L, 0x5000L, 0x6000L, 0x7000L, 768, 1e-12f);
        assertThat(ops.launches()).isEqualTo(2);
    }

    @Test
    void withoutTheOptionTheResidualIsAddedInTheLayerNormAsBefore() {
        CudaTensorOps ops = new CudaTensorOps(device, Precision.FP32, library, pool);
        ops.linearAddLayerNorm(stream, 0x1000, 0x2000, 0x3000, 0x4000, 0x5000, 0x6000, 0x7000, 256, 768, 768, 1e-12f);

        assertThat(library.residualPlans).isEmpty();
        assertThat(library.plans).hasSize(1);
        assertThat(library.runs.getFirst().residual()).isZero();
        assertThat(stream.only().kernel()).isEqualTo("add_layer_norm_warp");
        assertThat(stream.only().arguments()).containsExactly(0x7000L, 0x4000L, 0x5000L, 0x6000L, 0x7000L, 256, 768,
                1e-12f);
    }

    @Test
    void aShapeTheLibraryDeclinesOrAnUnalignedResidualFallsBackToTheAddInTheLayerNorm() {
        CudaTensorOps ops = new CudaTensorOps(device, Precision.FP32, library, pool, RESIDUAL);
        ops.linearAddLayerNorm(stream, 0x1000, 0x2000, 0x3000, 0x4000, 0x5000, 0x6000, 0x7000, 8, 768, 3, 1e-12f);
        assertThat(library.residualPlans).isEmpty();
        assertThat(stream.launches.getLast().kernel()).isEqualTo("add_layer_norm");
        assertThat(stream.launches.getLast().arguments().get(1)).isEqualTo(0x4000L);

        stream.launches.clear();
        ops.linearAddLayerNorm(stream, 0x1000, 0x2000, 0x3000, 0x4010, 0x5000, 0x6000, 0x7000, 8, 768, 768, 1e-12f);
        assertThat(library.residualPlans).as("a 16-byte aligned residual is not what the plans assume").isEmpty();
        assertThat(library.runs).extracting(Run::residual).containsExactly(0L);
        assertThat(stream.only().arguments().get(1)).isEqualTo(0x4010L);
    }

    @Test
    void warpLayerNormRunsOneRowABlockWhereTheRowIsWholeVectors() {
        CudaTensorOps ops = new CudaTensorOps(device, Precision.BF16, library, pool, WARP_NORM);
        ops.addLayerNorm(stream, 0x100, 0x200, 0x300, 0x400, 0x500, 130, 768, 1e-12f);   // 3 chunks of 256
        Launch warp = stream.only();
        assertThat(warp.kernel()).isEqualTo("add_layer_norm_warp_bf16");
        assertThat(warp.grid()).containsExactly(130, 1, 1);
        assertThat(warp.block()).containsExactly(32, 1, 1);
        assertThat(warp.arguments()).containsExactly(0x100L, 0x200L, 0x300L, 0x400L, 0x500L, 130, 768, 1e-12f);

        stream.launches.clear();
        ops.addLayerNorm(stream, 0x100, 0x200, 0x300, 0x400, 0x500, 130, 384, 1e-12f);   // 1.5 chunks of bf16
        ops.addLayerNorm(stream, 0x100, 0x208, 0x300, 0x400, 0x500, 130, 768, 1e-12f);   // residual not 16-aligned
        ops.addLayerNorm(stream, 0x100, 0x200, 0x300, 0x400, 0x500, 4, 4096, 1e-12f);    // 16 chunks: too long
        assertThat(stream.launches).extracting(Launch::kernel).containsExactly("add_layer_norm_bf16_reg",
                "add_layer_norm_bf16_reg", "add_layer_norm_bf16");

        stream.launches.clear();
        ops.embeddingLayerNorm(stream, 0x10, 0x20, 0x100, 0x200, 0x300, 0x400, 0x500, 0x600, 2, 9, 768, 1e-12f);
        Launch embed = stream.only();
        assertThat(embed.kernel()).isEqualTo("embedding_layer_norm_warp_bf16");
        assertThat(embed.grid()).containsExactly(18, 1, 1);
        assertThat(embed.arguments()).containsExactly(0x10L, 0x20L, 0x100L, 0x200L, 0x300L, 0x400L, 0x500L, 0x600L,
                18, 9, 768, 1e-12f);
    }

    @Test
    void warpLayerNormOnFp32ActivationsTakesRowsOfWholeFloat4Chunks() {
        CudaTensorOps ops = new CudaTensorOps(device, Precision.FP32, null, null, WARP_NORM);
        ops.addLayerNorm(stream, 0x100, 0, 0x300, 0x400, 0x500, 16384, 384, 1e-12f);     // 3 chunks of 128
        ops.addLayerNorm(stream, 0x100, 0, 0x300, 0x400, 0x500, 16384, 1056, 1e-12f);    // not whole chunks
        assertThat(stream.launches).extracting(Launch::kernel).containsExactly("add_layer_norm_warp",
                "add_layer_norm");
        assertThat(stream.launches.getFirst().grid()).containsExactly(16384, 1, 1);
    }

    @Test
    void withTheOptionOffLayerNormStaysOnTheBlockKernels() {
        CudaTensorOps ops = new CudaTensorOps(device, Precision.BF16, library, pool, KernelOptions.NONE);
        ops.addLayerNorm(stream, 0x100, 0x200, 0x300, 0x400, 0x500, 130, 768, 1e-12f);
        ops.embeddingLayerNorm(stream, 0x10, 0x20, 0x100, 0x200, 0x300, 0x400, 0x500, 0x600, 2, 9, 768, 1e-12f);
        assertThat(stream.launches).extracting(Launch::kernel).containsExactly("add_layer_norm_bf16_reg",
                "embedding_layer_norm_bf16");
    }
}
