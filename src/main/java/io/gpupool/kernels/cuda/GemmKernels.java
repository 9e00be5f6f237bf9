package io.gpupool.kernels.cuda;

import io.gpupool.backend.DeviceStream;
import io.gpupool.backend.KernelFunction;
import io.gpupool.backend.KernelModule;
import io.gpupool.kernels.TensorOps.Activation;

import static io.gpupool.kernels.cuda.KernelLauncher.ceilDiv;
import static io.gpupool.kernels.cuda.KernelLauncher.passBlocks;

/**
 * gpupool's own kernels for a linear layer ({@code src/main/cuda/gemm.cu}): which GEMM kernel, tile and split of K a
 * product runs on, and the pass that applies an activation after a product that did not. {@link CudaTensorOps}
 * runs products here without a {@link io.gpupool.backend.MatmulLibrary}, and {@link LibraryGemm} where the library
 * declines a shape or its measurement found these kernels faster. Arguments arrive checked.
 *
 * <pre>
 *   kernel                                    grid                        block
 *   gemm/gemm_f32                             (⌈out/128⌉, ⌈rows/128⌉)     256   precision FP32, or a shape the
 *                                                                               others reject
 *   gemm/gemm_tc_{tf32,bf16,tf32x3}_128       (⌈out/128⌉, ⌈rows/128⌉)     256   enough 128² tiles
 *   gemm/gemm_tc_{tf32,bf16,tf32x3}_64        (⌈out/64⌉,  ⌈rows/64⌉)      128   small products
 *   split-K (few output tiles, see below): three launches
 *     gemm/gemm_splitk_init                   (⌈rows·out/256⌉ ≤ 1024)     256   Y = bias or 0
 *     gemm/gemm_f32_splitk | gemm_tc_*_64_splitk
 *                                             (tiles as above, slices)    as above
 *     gemm/gemm_splitk_act                    (as init)                   256   only if activation ≠ NONE
 *   on bf16 activations (the library declines the shape, or the operands are not 256-byte aligned):
 *     gemm/linear_bf16_warp                   (⌈rows·out/8⌉)              256   one warp per output
 *   activation pass after a product whose epilogue did not apply it:
 *     gemm/gemm_splitk_act | ops/activate_bf16 (≤1024 grid-stride)        256
 * </pre>
 *
 * <h2>Precision</h2>
 * {@link Precision#FP32} is exact single precision on the CUDA cores and matches a float reference to rounding (the
 * mode the tests compare with transformers at 1e-4). {@link Precision#TF32} and {@link Precision#BF16} run on the
 * tensor cores with FP32 accumulation; inputs and outputs stay FP32 in memory and operands are rounded as they are
 * loaded (TF32 truncates to a 10-bit mantissa, BF16 rounds to nearest-even 8 bits), so no bf16 copy of the weights
 * is needed. {@link Precision#TF32X3} splits each FP32 operand into two TF32 parts and sums three tensor-core
 * products (hi·hi + hi·lo + lo·hi): close to FP32 accuracy (about 2^-21 relative per product) at a third of the
 * TF32 rate, an alternative to FP32 on large products. The tensor-core kernels need {@code in % 4 == 0}; other
 * shapes fall back to the FP32 kernel.
 *
 * <h2>Split-K</h2>
 * A 128-token product has only 6 (FP32, 128² tiles) to 24 (tensor cores, 64² tiles) output tiles for 768
 * outputs: a fraction of the 132 multiprocessors of an H100/H200, each block walking all of K alone. When the
 * tiles are fewer than {@link #SPLIT_K_TARGET_BLOCKS}, K is cut into {@code s} slices, each a grid z index:
 * <pre>
 *   s = min(SPLIT_K_MAX, ⌊SPLIT_K_TARGET_BLOCKS / tiles⌋, ⌊in / SPLIT_K_MIN_CHUNK⌋)      no split when s &lt; 2
 *   kChunk = ⌈in / s⌉ rounded up to 16 (a tensor-core k-tile);  slices = ⌈in / kChunk⌉
 * </pre>
 * Y is first set to the bias (or zero), every (tile, slice) block atomically adds its partial product, and when
 * the activation is not NONE one more pass applies it in place (the sum is complete only after all slices).
 * Results differ from the unsplit kernels only in the order of the FP32 additions (~1e-7 relative). No
 * workspace is needed. Turned off with {@code -Dgpupool.kernels.splitK=false} (read once, at class load, by
 * {@link CudaTensorOps}).
 */
final class GemmKernels {

    /**
     * Fewer 128×128 output tiles than this and a tensor-core product runs with 64×64 tiles instead, so that
     * small (few-token) products still occupy the device's multiprocessors (132 on an H100/H200). The threshold
     * lies between the grid sizes where each tile size measured faster (tools/cuda-harness/NOTES.md).
     */
    static final int LARGE_TILE_MIN_BLOCKS = 384;
    /**
     * Split-K aims at this many blocks: two waves on 132 multiprocessors (H100/H200), so that a product whose
     * output tiles alone leave most of the device idle spreads its K over the rest. The device interface does not
     * report the multiprocessor count, hence a constant; on a smaller card it only means more slices than needed.
     */
    static final int SPLIT_K_TARGET_BLOCKS = 264;
    /** The shortest K slice: 128 is 8 tensor-core k-tiles (16 of gemm_f32), enough to run the load pipeline. */
    static final int SPLIT_K_MIN_CHUNK = 128;
    /** At most this many slices, bounding the atomic additions to 16 per output element. */
    static final int SPLIT_K_MAX = 16;

    private final Precision precision;
    private final boolean splitK;
    /** Whether activations are bf16 (then every product runs {@code linear_bf16_warp}). */
    private final boolean bf16Activations;
    private final KernelLauncher launcher;
    private final KernelFunction gemmF32;
    private final KernelFunction gemmLarge;
    private final KernelFunction gemmSmall;
    private final KernelFunction splitF32;
    private final KernelFunction splitSmall;
    private final KernelFunction splitInit;
    private final KernelFunction splitAct;
    private final KernelFunction linearBf16Warp;
    private final KernelFunction activateBf16;

    /** The kernels of {@code gemm} (and the bf16 activation pass of {@code ops}) for products in {@code precision}. */
    GemmKernels(KernelModule gemm, KernelModule ops, Precision precision, boolean splitK, boolean bf16Activations,
                KernelLauncher launcher) {
        this.precision = precision;
        this.splitK = splitK;
        this.bf16Activations = bf16Activations;
        this.launcher = launcher;
        gemmF32 = gemm.function("gemm_f32");
        String tc = switch (precision) {
            case BF16 -> "bf16";
            case TF32X3 -> "tf32x3";
            default -> "tf32";
        };
        gemmLarge = precision == Precision.FP32 ? gemmF32 : gemm.function("gemm_tc_" + tc + "_128");
        gemmSmall = precision == Precision.FP32 ? gemmF32 : gemm.function("gemm_tc_" + tc + "_64");
        splitF32 = gemm.function("gemm_f32_splitk");
        splitSmall = precision == Precision.FP32 ? splitF32 : gemm.function("gemm_tc_" + tc + "_64_splitk");
        splitInit = gemm.function("gemm_splitk_init");
        splitAct = gemm.function("gemm_splitk_act");
        linearBf16Warp = gemm.function("linear_bf16_warp");
        activateBf16 = ops.function("activate_bf16");
    }

    /** Whether few-tile products are split along K. */
    boolean splitK() {
        return splitK;
    }

    /** The product on these kernels: on bf16 activations one warp per output, else the GEMM kernels above. */
    void linear(DeviceStream stream, long x, long weight, long bias, long y, int rows, int in, int out,
                Activation activation) {
        if (bf16Activations) {
            long elements = (long) rows * out;
            launcher.launch(stream, linearBf16Warp, (int) ceilDiv(elements, 8), 1, 1, 256, 1, 1, 0, x, weight, bias,
                    y, rows, out, in, activation.ordinal());
            return;
        }
        KernelFunction kernel = gemmKernel(rows, in, out);
        int tile = tile(kernel);
        int threads = tile == 64 ? 128 : 256;
        int gridX = ceilDiv(out, tile);
        int gridY = ceilDiv(rows, tile);
        int slices = splitK ? splitSlices((long) gridX * gridY, in) : 1;
        if (slices < 2) {
            launcher.launch(stream, kernel, gridX, gridY, 1, threads, 1, 1, 0,
                    x, weight, bias, y, rows, out, in, activation.ordinal());
            return;
        }
        int chunk = splitChunk(in, slices);
        int passBlocks = passBlocks((long) rows * out);
        launcher.launch(stream, splitInit, passBlocks, 1, 1, 256, 1, 1, 0, bias, y, rows, out);
        launcher.launch(stream, kernel == gemmF32 ? splitF32 : splitSmall, gridX, gridY, ceilDiv(in, chunk), threads,
                1, 1, 0, x, weight, y, rows, out, in, chunk);
        if (activation != Activation.NONE) {
            launcher.launch(stream, splitAct, passBlocks, 1, 1, 256, 1, 1, 0, y, rows, out, activation.ordinal());
        }
    }

    /** Applies {@code activation} in place to a product's {@code rows × out} output (one grid-stride pass). */
    void activate(DeviceStream stream, long y, int rows, int out, Activation activation) {
        long count = (long) rows * out;
        if (bf16Activations) {
            launcher.launch(stream, activateBf16, passBlocks(count), 1, 1, 256, 1, 1, 0, y, count,
                    activation.ordinal());
        } else {
            launcher.launch(stream, splitAct, passBlocks(count), 1, 1, 256, 1, 1, 0, y, rows, out,
                    activation.ordinal());
        }
    }

    /** The kernel {@link #linear} would launch for this shape (for naming a measured choice). */
    String kernelName(int rows, int in, int out) {
        if (bf16Activations) {
            return linearBf16Warp.name();
        }
        KernelFunction kernel = gemmKernel(rows, in, out);
        int tile = tile(kernel);
        boolean split = splitK && splitSlices((long) ceilDiv(out, tile) * ceilDiv(rows, tile), in) >= 2;
        return kernel.name() + (split ? " split-K" : "");
    }

    /** The output tile of {@code kernel}: 64 for the small tensor-core kernels, else 128. */
    private int tile(KernelFunction kernel) {
        return kernel == gemmSmall && kernel != gemmF32 ? 64 : 128;
    }

    /** The GEMM kernel for this precision and shape. */
    private KernelFunction gemmKernel(int rows, int in, int out) {
        if (precision == Precision.FP32 || in % 4 != 0) {
            return gemmF32;
        }
        long largeTiles = (long) ceilDiv(out, 128) * ceilDiv(rows, 128);
        return largeTiles >= LARGE_TILE_MIN_BLOCKS ? gemmLarge : gemmSmall;
    }

    /**
     * K slices for a product of {@code tiles} output tiles and inner size {@code in}: below 2 means no split
     * (package-private for tests; see the class comment for the rule).
     */
    static int splitSlices(long tiles, int in) {
        if (tiles >= SPLIT_K_TARGET_BLOCKS) {
            return 1;
        }
        long slices = Math.min(SPLIT_K_MAX, Math.min(SPLIT_K_TARGET_BLOCKS / tiles, in / SPLIT_K_MIN_CHUNK));
        if (slices < 2) {
            return 1;
        }
        return ceilDiv(in, splitChunk(in, (int) slices));
    }

    /** K columns per slice: ⌈in / slices⌉ rounded up to a multiple of 16. */
    static int splitChunk(int in, int slices) {
        return ceilDiv(ceilDiv(in, slices), 16) * 16;
    }
}
