package io.gpupool.kernels.cuda;

import io.gpupool.backend.MatmulLibrary;
import io.gpupool.backend.MatmulLibrary.Compute;
import io.gpupool.backend.MatmulLibrary.ElementType;
import io.gpupool.backend.MatmulLibrary.Epilogue;
import io.gpupool.model.Bf16;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * The two opt-in paths of {@link KernelOptions} on a real GPU: cuBLASLt adding the residual in the product
 * (its C operand, out of place) against a double reference and against the unfused product + add+LayerNorm, and the
 * warp-per-row LayerNorm kernels against the same references as the block kernels. FP32 within 1e-5 (transformers'
 * 1e-4 with room), BF16 within bf16 rounding of outputs of magnitude ~1 to ~5.
 */
@Tag("gpu")
class ResidualGemmGpuTest extends GpuProductsFixture {

    private static final KernelOptions FUSED = new KernelOptions(false, true, true);
    private static final KernelOptions WARP = new KernelOptions(false, false, true);

    private static MatmulLibrary library;

    ResidualGemmGpuTest() {
        super(11, WITH_POOL);
    }

    @BeforeAll
    static void loadLibrary() {
        library = cublasLt();
    }

    private CudaTensorOps ops(Precision precision, KernelOptions options) {
        return opened(new CudaTensorOps(device, precision, library, pool, options));
    }

    /** The library's residual plan alone: y = x·wᵀ (+ bias) + residual, C and D different matrices. */
    @Test
    void theResidualProductIsTheProductPlusTheResidual() {
        for (int[] shape : new int[][] {{128, 768, 768}, {37, 3072, 768}, {300, 64, 96}}) {
            int rows = shape[0];
            int in = shape[1];
            int out = shape[2];
            for (boolean withBias : new boolean[] {true, false}) {
                float[] x = randoms(rows * in, 1);
                float[] w = randoms(out * in, 0.1f);
                float[] bias = withBias ? randoms(out, 1) : new float[out];
                float[] residual = randoms(rows * out, 2);
                long dy = allocate((long) rows * out * Float.BYTES);
                stream.fill(dy, (byte) 0xFF, (long) rows * out * Float.BYTES);
                long dr = upload(residual);
                try (MatmulLibrary.Matmul plan = library.planResidual(rows, in, out, ElementType.FP32, Compute.FP32,
                        withBias ? Epilogue.BIAS : Epilogue.NONE)) {
                    long workspace = allocate(Math.max(256, library.workspaceBytes()));
                    plan.run(stream, upload(x), upload(w), withBias ? upload(bias) : 0, dr, dy, workspace);
                    stream.synchronize();
                }
                double[] expected = new double[rows * out];
                for (int r = 0; r < rows; r++) {
                    for (int o = 0; o < out; o++) {
                        double sum = (double) bias[o] + residual[r * out + o];
                        for (int k = 0; k < in; k++) {
                            sum += (double) x[r * in + k] * w[o * in + k];
                        }
                        expected[r * out + o] = sum;
                    }
                }
                assertClose("residual product " + rows + "x" + in + "->" + out + (withBias ? "" : " no bias"),
                        download(dy, rows * out), expected, 1e-5);
                assertClose("residual input untouched", download(dr, rows * out), toDouble(residual), 0);
            }
        }
    }

    @ParameterizedTest
    @EnumSource(value = Precision.class, names = {"FP32", "BF16"})
    void fusedLinearAddLayerNormMatchesTheUnfusedPathAndTheReference(Precision precision) {
        double tolerance = precision == Precision.FP32 ? 1e-5 : 4e-2;
        for (int[] shape : new int[][] {{128, 768, 768}, {40, 3072, 768}, {9, 256, 192}}) {
            int rows = shape[0];
            int in = shape[1];
            int out = shape[2];
            boolean bf16 = precision == Precision.BF16;
            float[] x = randoms(rows * in, 1);
            float[] w = randoms(out * in, 0.05f);
            float[] bias = randoms(out, 0.5f);
            float[] residual = randoms(rows * out, 2);
            float[] gamma = randoms(out, 1);
            float[] beta = randoms(out, 1);
            double[] expected = new double[rows * out];
            double[] pre = new double[out];
            for (int r = 0; r < rows; r++) {
                for (int o = 0; o < out; o++) {
                    double sum = value(bias[o], bf16) + value(residual[r * out + o], bf16);
                    for (int k = 0; k < in; k++) {
                        sum += value(x[r * in + k], bf16) * value(w[o * in + k], bf16);
                    }
                    pre[o] = sum;
                }
                normalise(pre, gamma, beta, expected, r * out);
            }
            float[][] results = new float[2][];
            for (int fused = 0; fused < 2; fused++) {
                CudaTensorOps ops = ops(precision, fused == 1 ? FUSED : KernelOptions.DEFAULT);
                long dy = allocate((long) rows * out * ops.activationBytes());
                ops.linearAddLayerNorm(stream, upload(x, bf16), upload(w, bf16), upload(bias, bf16),
                        upload(residual, bf16), upload(gamma), upload(beta), dy, rows, in, out, 1e-12f);
                results[fused] = widen(ops, dy, rows * out);
                assertClose((fused == 1 ? "fused" : "unfused") + " linearAddLayerNorm " + precision + " " + rows + "x"
                        + in + "->" + out, results[fused], expected, tolerance);
            }
            assertClose("fused against unfused " + precision, results[1], toDouble(results[0]), tolerance);
        }
    }

    @ParameterizedTest
    @EnumSource(value = Precision.class, names = {"FP32", "BF16"})
    void warpLayerNormKernelsMatchTheReference(Precision precision) {
        boolean bf16 = precision == Precision.BF16;
        double tolerance = bf16 ? 3e-2 : 1e-5;
        CudaTensorOps ops = ops(precision, WARP);
        for (int cols : bf16 ? new int[] {768, 1024, 2048} : new int[] {768, 384, 1024}) {
            int rows = 45;                                           // not a multiple of the 4 rows a block
            float[] x = randoms(rows * cols, 3);
            float[] residual = randoms(rows * cols, 1);
            float[] gamma = randoms(cols, 1);
            float[] beta = randoms(cols, 1);
            double[] expected = new double[rows * cols];
            double[] pre = new double[cols];
            for (boolean withResidual : new boolean[] {true, false}) {
                for (int r = 0; r < rows; r++) {
                    for (int c = 0; c < cols; c++) {
                        pre[c] = value(x[r * cols + c], bf16) + (withResidual ? value(residual[r * cols + c], bf16) : 0);
                    }
                    normalise(pre, gamma, beta, expected, r * cols);
                }
                long dx = upload(x, bf16);
                ops.addLayerNorm(stream, dx, withResidual ? upload(residual, bf16) : 0, upload(gamma), upload(beta),
                        dx, rows, cols, 1e-12f);                         // in place
                assertClose("warp addLayerNorm " + precision + " " + rows + "x" + cols
                        + (withResidual ? " residual" : " plain"), widen(ops, dx, rows * cols), expected, tolerance);
            }
        }

        int batch = 3;
        int seq = 7;
        int hidden = 768;
        float[] word = randoms(13 * hidden, 1);
        float[] position = randoms(seq * hidden, 1);
        float[] type = randoms(2 * hidden, 1);
        float[] gamma = randoms(hidden, 1);
        float[] beta = randoms(hidden, 1);
        int[] ids = new int[batch * seq];
        int[] types = new int[batch * seq];
        for (int t = 0; t < ids.length; t++) {
            ids[t] = random.nextInt(13);
            types[t] = random.nextInt(2);
        }
        double[] expected = new double[ids.length * hidden];
        double[] pre = new double[hidden];
        for (int t = 0; t < ids.length; t++) {
            for (int c = 0; c < hidden; c++) {
                pre[c] = (double) word[ids[t] * hidden + c] + position[(t % seq) * hidden + c]
                        + type[types[t] * hidden + c];
            }
            normalise(pre, gamma, beta, expected, t * hidden);
        }
        long out = allocate((long) ids.length * hidden * ops.activationBytes());
        ops.embeddingLayerNorm(stream, uploadInts(ids), uploadInts(types), upload(word), upload(position),
                upload(type), upload(gamma), upload(beta), out, batch, seq, hidden, 1e-12f);
        assertClose("warp embeddingLayerNorm " + precision, widen(ops, out, expected.length), expected, tolerance);
    }

    // --- helpers -----------------------------------------------------------------------------------------------

    /** LayerNorm of {@code pre} (population variance, eps 1e-12) · gamma + beta into {@code into} at {@code at}. */
    private static void normalise(double[] pre, float[] gamma, float[] beta, double[] into, int at) {
        double mean = 0;
        for (double v : pre) {
            mean += v;
        }
        mean /= pre.length;
        double var = 0;
        for (double v : pre) {
            var += (v - mean) * (v - mean);
        }
        var /= pre.length;
        for (int c = 0; c < pre.length; c++) {
            into[at + c] = (pre[c] - mean) / Math.sqrt(var + 1e-12) * gamma[c] + beta[c];
        }
    }

    /** The value the device sees: the float itself, or its bf16 rounding. */
    private static double value(float v, boolean bf16) {
        return bf16 ? Bf16.toFloat(Bf16.fromFloat(v)) : v;
    }

    private static double[] toDouble(float[] values) {
        double[] out = new double[values.length];
        for (int i = 0; i < values.length; i++) {
            out[i] = values[i];
        }
        return out;
    }

    private long upload(float[] values, boolean bf16) {
        return bf16 ? uploadBf16(values) : upload(values);
    }
}
