package io.gpupool.kernels.cuda;

import io.gpupool.backend.DeviceStream;
import io.gpupool.backend.MatmulLibrary;
import io.gpupool.kernels.StreamWorkspaces;
import io.gpupool.kernels.TensorOps.Activation;
import io.gpupool.kernels.TensorOps.Pooling;
import io.gpupool.memory.DeviceBlock;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * {@link CudaTensorOps} on cuBLASLt (through the device's {@link MatmulLibrary}) on a real GPU, against plain Java
 * references in double: every linear epilogue in FP32 (within 1e-5 absolute, so within transformers' 1e-4), TF32
 * and BF16 (bf16-resident activations: inputs, weights and outputs in bf16, tolerance 4e-2 absolute on outputs of
 * magnitude ~1), the bf16 row kernels, the fused embeddings + LayerNorm, and where the workspaces come from.
 * The library folder is {@code -Dgpupool.kernels.cublas-lt-dir} when set, else the usual search; a GPU machine
 * without the library fails here rather than skipping, since the server would silently run slower.
 */
@Tag("gpu")
class CublasLtOpsGpuTest extends GpuProductsFixture {

    private static MatmulLibrary library;

    CublasLtOpsGpuTest() {
        super(7, WITH_POOL);
    }

    @BeforeAll
    static void loadLibrary() {
        library = cublasLt();
    }

    private CudaTensorOps ops(Precision precision) {
        return opened(new CudaTensorOps(device, precision, library, pool));
    }

    @Test
    void theEngineIsTheLibraryAndNamesItsVersion() {
        assertThat(library.description()).startsWith("cuBLASLt ");
        assertThat(ops(Precision.FP32).gemmEngine()).isEqualTo(library.description());
        assertThat(ops(Precision.BF16).activationBytes()).isEqualTo(2);
        assertThat(ops(Precision.TF32).activationBytes()).isEqualTo(4);
    }

    @ParameterizedTest
    @EnumSource(Activation.class)
    void fp32LinearIsExactWithEveryEpilogue(Activation activation) {
        CudaTensorOps ops = ops(Precision.FP32);
        checkLinear(ops, 67, 96, 136, activation, 1e-5, true);
        checkLinear(ops, 128, 768, 3072, activation, 1e-5, true);
        checkLinear(ops, 40, 64, 32, activation, 1e-5, false);
    }

    @ParameterizedTest
    @EnumSource(value = Precision.class, names = {"TF32", "BF16"})
    void tensorCoreLinearIsCloseToReference(Precision precision) {
        double tolerance = precision == Precision.TF32 ? 5e-3 : 4e-2;
        CudaTensorOps ops = ops(precision);
        for (Activation activation : Activation.values()) {
            checkLinear(ops, 200, 256, 304, activation, tolerance, true);
        }
        checkLinear(ops, 512, 768, 3072, Activation.GELU, tolerance, true);   // fused bias + GELU epilogue
        checkLinear(ops, 16, 3072, 768, Activation.NONE, tolerance, true);
        checkLinear(ops, 8, 768, 3, Activation.NONE, tolerance, true);        // a classifier: rows of 3 outputs
    }

    @Test
    void eachStreamTakesOneWorkspaceFromThePoolAndCloseGivesItBack() {
        CudaTensorOps ops = ops(Precision.BF16);
        assertThat(pool.metrics().allocatedBytes()).isZero();
        checkLinear(ops, 64, 128, 128, Activation.NONE, 4e-2, true);
        checkLinear(ops, 32, 256, 64, Activation.GELU, 4e-2, true);
        assertThat(ops.workspaceBytesHeld()).isGreaterThanOrEqualTo(library.workspaceBytes());
        assertThat(pool.metrics().allocatedBytes()).isEqualTo(ops.workspaceBytesHeld());
        try (DeviceStream other = device.createStream(1)) {
            DeviceStream first = stream;
            stream = other;
            checkLinear(ops, 64, 128, 128, Activation.NONE, 4e-2, true);
            stream = first;
            assertThat(ops.workspaceBytesHeld()).isGreaterThanOrEqualTo(2 * library.workspaceBytes());
            other.synchronize();
        }
        ops.close();
        opened.remove(ops);
        assertThat(pool.metrics().allocatedBytes()).isZero();
    }

    /**
     * A workspace given back while the stream is idle goes to the pool (another stream may take and overwrite the
     * memory) and the next product takes one again and stays right, on the few-tile shapes cuBLASLt splits along K.
     */
    @Test
    void aReleasedWorkspaceIsTakenAgainAndProductsStayRight() {
        CudaTensorOps ops = ops(Precision.BF16);
        StreamWorkspaces workspaces = ops.workspaces().orElseThrow();
        checkLinear(ops, 16, 3072, 768, Activation.NONE, 4e-2, true);
        assertThat(workspaces.release(stream)).isGreaterThanOrEqualTo(library.workspaceBytes());
        assertThat(pool.metrics().allocatedBytes()).isZero();
        try (DeviceStream other = device.createStream(1)) {
            DeviceBlock scribble = pool.allocate(library.workspaceBytes(), other);
            other.fill(scribble.address(), (byte) 0x7F, scribble.size());
            other.synchronize();
            scribble.release();
        }
        checkLinear(ops, 16, 3072, 768, Activation.NONE, 4e-2, true);
        checkLinear(ops, 8, 768, 3072, Activation.GELU, 4e-2, true);
        assertThat(pool.metrics().allocatedBytes()).isEqualTo(workspaces.heldBytes()).isPositive();
    }

    @Test
    void fusedEmbeddingLayerNormMatchesReferenceInFp32AndBf16() {
        int batch = 2;
        int seq = 5;
        int hidden = 96;
        float[] word = randoms(11 * hidden, 1);
        float[] position = randoms(8 * hidden, 1);
        float[] type = randoms(2 * hidden, 1);
        float[] gamma = randoms(hidden, 1);
        float[] beta = randoms(hidden, 1);
        int[] ids = {1, 5, 10, 0, 3, 2, 2, 7, 9, 4};
        int[] types = {0, 0, 1, 1, 1, 0, 1, 0, 1, 0};
        double[] expected = new double[batch * seq * hidden];
        for (int t = 0; t < batch * seq; t++) {
            double[] v = new double[hidden];
            double mean = 0;
            for (int c = 0; c < hidden; c++) {
                v[c] = (double) word[ids[t] * hidden + c] + position[(t % seq) * hidden + c] + type[types[t] * hidden + c];
                mean += v[c];
            }
            mean /= hidden;
            double var = 0;
            for (int c = 0; c < hidden; c++) {
                var += (v[c] - mean) * (v[c] - mean);
            }
            var /= hidden;
            for (int c = 0; c < hidden; c++) {
                expected[t * hidden + c] = (v[c] - mean) / Math.sqrt(var + 1e-12) * gamma[c] + beta[c];
            }
        }
        for (Precision precision : List.of(Precision.FP32, Precision.BF16)) {
            CudaTensorOps ops = ops(precision);
            long out = allocate((long) batch * seq * hidden * ops.activationBytes());
            ops.embeddingLayerNorm(stream, uploadInts(ids), uploadInts(types), upload(word), upload(position),
                    upload(type), upload(gamma), upload(beta), out, batch, seq, hidden, 1e-12f);
            assertClose("embeddingLayerNorm " + precision, widen(ops, out, expected.length), expected,
                    precision == Precision.FP32 ? 1e-5 : 3e-2);
        }
    }

    @Test
    void bf16LayerNormAttentionAndPoolingMatchReference() {
        CudaTensorOps ops = ops(Precision.BF16);
        int rows = 9;
        int cols = 192;
        float[] x = randoms(rows * cols, 3);
        float[] residual = randoms(rows * cols, 1);
        float[] gamma = randoms(cols, 1);
        float[] beta = randoms(cols, 1);
        long y = allocate((long) rows * cols * 2);
        ops.addLayerNorm(stream, uploadBf16(x), uploadBf16(residual), upload(gamma), upload(beta), y, rows, cols,
                1e-12f);
        double[] expected = new double[rows * cols];
        for (int r = 0; r < rows; r++) {
            double mean = 0;
            for (int c = 0; c < cols; c++) {
                mean += bf(x[r * cols + c]) + bf(residual[r * cols + c]);
            }
            mean /= cols;
            double var = 0;
            for (int c = 0; c < cols; c++) {
                double v = bf(x[r * cols + c]) + bf(residual[r * cols + c]) - mean;
                var += v * v;
            }
            var /= cols;
            for (int c = 0; c < cols; c++) {
                double v = bf(x[r * cols + c]) + bf(residual[r * cols + c]) - mean;
                expected[r * cols + c] = v / Math.sqrt(var + 1e-12) * gamma[c] + beta[c];
            }
        }
        assertClose("addLayerNorm bf16", widen(ops, y, rows * cols), expected, 3e-2);

        int batch = 3;
        int seq = 37;
        int heads = 2;
        int headDim = 64;
        int width = 3 * heads * headDim;
        float[] qkv = randoms(batch * seq * width, 1);
        int[] mask = new int[batch * seq];
        for (int s = 0; s < seq; s++) {
            mask[s] = 1;
            mask[seq + s] = s < 20 ? 1 : 0;
            mask[2 * seq + s] = 0;
        }
        long context = allocate((long) batch * seq * heads * headDim * 2);
        long dmask = uploadInts(mask);
        ops.attention(stream, uploadBf16(qkv), dmask, 0, context, batch, seq, heads, headDim);
        double[] expectedContext = bf16AttentionReference(qkv, mask, batch, seq, heads);
        assertClose("attention bf16 in/out", widen(ops, context, expectedContext.length), expectedContext, 3e-2);

        int hidden = heads * headDim;
        double[] expectedMean = new double[batch * hidden];
        float[] contextValues = widen(ops, context, expectedContext.length);
        for (int b = 0; b < batch; b++) {
            int real = 0;
            for (int s = 0; s < seq; s++) {
                real += mask[b * seq + s];
            }
            for (int c = 0; c < hidden; c++) {
                double sum = 0;
                for (int s = 0; s < seq; s++) {
                    sum += mask[b * seq + s] * (double) contextValues[(b * seq + s) * hidden + c];
                }
                expectedMean[b * hidden + c] = sum / Math.max(real, 1e-9);
            }
        }
        long mean = allocate((long) batch * hidden * 2);
        ops.pool(stream, context, dmask, mean, batch, seq, hidden, Pooling.MEAN);
        assertClose("pool MEAN bf16", widen(ops, mean, batch * hidden), expectedMean, 1e-2);
    }

    @Test
    void tiledBf16AttentionMatchesReferenceAndTheClassicKernelOnAMaskedBatch() {
        CudaTensorOps tiled = new CudaTensorOps(device, Precision.BF16, library, pool, KernelOptions.DEFAULT,
                AttentionKernels.TILED);
        CudaTensorOps classic = new CudaTensorOps(device, Precision.BF16, library, pool, KernelOptions.DEFAULT,
                AttentionKernels.CLASSIC);
        opened.add(tiled);
        opened.add(classic);
        // {batch, seq, heads}: 64-query blocks (12 blocks of 128 would be too few), then the 8-warp 128-query blocks
        // (2·12·4 = 96, just enough); seq 200 leaves a partial last key tile, the padded sequences end in tiles of
        // padding only
        for (int[] shape : new int[][] {{3, 200, 2}, {4, 200, 12}}) {
            int batch = shape[0];
            int seq = shape[1];
            int heads = shape[2];
            float[] qkv = randoms(batch * seq * 3 * heads * 64, 1);
            int[] mask = new int[batch * seq];
            for (int b = 0; b < batch; b++) {
                int real = b == 0 ? seq : b == 2 ? 0 : Math.max(1, seq - 23 * b);   // batch 2: fully masked
                for (int s = 0; s < real; s++) {
                    mask[b * seq + s] = 1;
                }
            }
            long dqkv = uploadBf16(qkv);
            long dmask = uploadInts(mask);
            int count = batch * seq * heads * 64;
            long fromTiled = allocate(2L * count);
            long fromClassic = allocate(2L * count);
            stream.fill(fromTiled, (byte) 0xFF, 2L * count);   // NaN: an element the kernel skips fails below
            stream.fill(fromClassic, (byte) 0xFF, 2L * count);
            tiled.attention(stream, dqkv, dmask, 0, fromTiled, batch, seq, heads, 64);
            classic.attention(stream, dqkv, dmask, 0, fromClassic, batch, seq, heads, 64);
            double[] expected = bf16AttentionReference(qkv, mask, batch, seq, heads);
            float[] tiledValues = widen(tiled, fromTiled, count);
            float[] classicValues = widen(classic, fromClassic, count);
            String what = batch + "x" + seq + ", " + heads + " heads";
            assertClose("tiled bf16 attention " + what, tiledValues, expected, 3e-2);
            assertClose("classic bf16 attention " + what, classicValues, expected, 3e-2);
            double[] classicWide = new double[count];
            for (int i = 0; i < count; i++) {
                classicWide[i] = classicValues[i];
            }
            assertClose("tiled against classic bf16 attention " + what, tiledValues, classicWide, 8e-3);
        }
    }

    // --- helpers -----------------------------------------------------------------------------------------------

    /** Attention (head size 64) in double over the bf16-rounded {@code qkv}; masked keys score -FLT_MAX. */
    private static double[] bf16AttentionReference(float[] qkv, int[] mask, int batch, int seq, int heads) {
        int headDim = 64;
        int width = 3 * heads * headDim;
        double[] expectedContext = new double[batch * seq * heads * headDim];
        double[] p = new double[seq];
        for (int b = 0; b < batch; b++) {
            for (int h = 0; h < heads; h++) {
                for (int i = 0; i < seq; i++) {
                    double max = Double.NEGATIVE_INFINITY;
                    for (int j = 0; j < seq; j++) {
                        double dot = 0;
                        for (int d = 0; d < headDim; d++) {
                            dot += bf(qkv[(b * seq + i) * width + h * headDim + d])
                                    * bf(qkv[(b * seq + j) * width + heads * headDim + h * headDim + d]);
                        }
                        p[j] = mask[b * seq + j] != 0 ? dot / 8 : -Float.MAX_VALUE;
                        max = Math.max(max, p[j]);
                    }
                    double sum = 0;
                    for (int j = 0; j < seq; j++) {
                        p[j] = Math.exp(p[j] - max);
                        sum += p[j];
                    }
                    for (int d = 0; d < headDim; d++) {
                        double acc = 0;
                        for (int j = 0; j < seq; j++) {
                            acc += p[j] * bf(qkv[(b * seq + j) * width + 2 * heads * headDim + h * headDim + d]);
                        }
                        expectedContext[((b * seq + i) * heads + h) * headDim + d] = acc / sum;
                    }
                }
            }
        }
        return expectedContext;
    }

    private void checkLinear(CudaTensorOps ops, int rows, int in, int out, Activation activation, double tolerance,
                             boolean withBias) {
        boolean bf16 = ops.activationBytes() == 2;
        float[] x = randoms(rows * in, 1);
        float[] w = randoms(out * in, 0.1f);
        float[] bias = withBias ? randoms(out, 1) : new float[out];
        long dy = allocate((long) rows * out * ops.activationBytes());
        stream.fill(dy, (byte) 0xFF, (long) rows * out * ops.activationBytes());
        long dx = bf16 ? uploadBf16(x) : upload(x);
        long dw = bf16 ? uploadBf16(w) : upload(w);
        long db = !withBias ? 0 : bf16 ? uploadBf16(bias) : upload(bias);
        ops.linear(stream, dx, dw, db, dy, rows, in, out, activation);
        float[] got = widen(ops, dy, rows * out);
        double[] expected = new double[rows * out];
        for (int r = 0; r < rows; r++) {
            for (int o = 0; o < out; o++) {
                double sum = bias[o];
                for (int k = 0; k < in; k++) {
                    sum += (double) x[r * in + k] * w[o * in + k];
                }
                expected[r * out + o] = activate(sum, activation);
            }
        }
        assertClose("linear " + rows + "x" + in + "->" + out + " " + activation + " " + ops.precision() + " on "
                + ops.gemmEngine() + (withBias ? "" : " no bias"), got, expected, tolerance);
    }

    private static double activate(double v, Activation activation) {
        return switch (activation) {
            case NONE -> v;
            case RELU -> Math.max(v, 0);
            case TANH -> Math.tanh(v);
            case GELU -> 0.5 * v * (1 + erf(v / Math.sqrt(2)));
        };
    }
}
