package io.gpupool.kernels.cuda;

import io.gpupool.backend.DeviceStream;
import io.gpupool.backend.MatmulLibrary;
import io.gpupool.backend.MatmulLibrary.Matmul;
import io.gpupool.kernels.TensorOps.Activation;
import io.gpupool.kernels.TensorOps.GemmChoice;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

import java.util.ArrayList;
import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * {@code gpupool.kernels.gemm-tuning} on a real GPU with cuBLASLt: at BERT-base shapes, for FP32, TF32 and BF16, the
 * products of the measured choice (whichever library algorithm or own kernel won) equal those of the heuristic's
 * first choice within the precision's rounding, both match a double reference, a second stream running the choice
 * gets the same products, the choices are listed, and the pool drains to 0 afterwards. Also the pieces underneath:
 * the library offers several algorithms, each plan and its twin compute the same product, and the stream's timing
 * events measure a kernel.
 */
@Tag("gpu")
class GemmTuningGpuTest extends GpuProductsFixture {

    private static MatmulLibrary library;

    /** A product shape and the activation after it. */
    private record Shape(int rows, int in, int out, Activation activation) {
    }

    /** BERT-base products (the FFN's up projection with its GELU); 16 and 128 tokens are where choices differ most. */
    private static final List<Shape> SHAPES = List.of(
            new Shape(16, 768, 2304, Activation.NONE), new Shape(16, 768, 3072, Activation.GELU),
            new Shape(16, 3072, 768, Activation.NONE), new Shape(128, 768, 768, Activation.NONE),
            new Shape(128, 768, 3072, Activation.GELU), new Shape(512, 3072, 768, Activation.NONE),
            new Shape(64, 768, 768, Activation.TANH));

    private DeviceStream second;

    GemmTuningGpuTest() {
        super(11, WITH_POOL);
    }

    @BeforeAll
    static void loadLibrary() {
        library = cublasLt();
    }

    @BeforeEach
    void openSecondStream() {
        second = newStream(1);
    }

    private CudaTensorOps ops(Precision precision, boolean tuning) {
        return opened(new CudaTensorOps(device, precision, library, pool, new KernelOptions(false, false, true, tuning)));
    }

    @ParameterizedTest
    @EnumSource(value = Precision.class, names = {"FP32", "TF32", "BF16"})
    void theMeasuredChoiceComputesWhatTheHeuristicsChoiceComputes(Precision precision) {
        double tolerance = switch (precision) {
            case FP32 -> 5e-5;   // 3072-term sums of magnitude ~5: a few float roundings
            case TF32 -> 5e-3;
            default -> 4e-2;
        };
        CudaTensorOps heuristic = ops(precision, false);
        CudaTensorOps tuned = ops(precision, true);
        for (Shape shape : SHAPES) {
            int rows = shape.rows();
            int in = shape.in();
            int out = shape.out();
            Activation activation = shape.activation();
            boolean bf16 = tuned.activationBytes() == 2;
            float[] x = randoms(rows * in, 1);
            float[] w = randoms(out * in, 0.05f);
            float[] bias = randoms(out, 1);
            long dx = bf16 ? uploadBf16(x) : upload(x);
            long dw = bf16 ? uploadBf16(w) : upload(w);
            long db = bf16 ? uploadBf16(bias) : upload(bias);
            long bytes = (long) rows * out * tuned.activationBytes();
            long fromHeuristic = allocate(bytes);
            long fromTuned = allocate(bytes);
            long fromSecond = allocate(bytes);
            stream.fill(fromTuned, (byte) 0xFF, bytes);   // NaN: an element the chosen product skips fails below
            heuristic.linear(stream, dx, dw, db, fromHeuristic, rows, in, out, activation);
            tuned.linear(stream, dx, dw, db, fromTuned, rows, in, out, activation);   // measures, then runs
            stream.synchronize();
            second.fill(fromSecond, (byte) 0xFF, bytes);
            tuned.linear(second, dx, dw, db, fromSecond, rows, in, out, activation);  // the choice, on a twin
            second.synchronize();

            String what = rows + "x" + in + "->" + out + " " + activation + " " + precision;
            float[] h = widen(heuristic, fromHeuristic, rows * out);
            float[] t = widen(tuned, fromTuned, rows * out);
            float[] s = widen(tuned, fromSecond, rows * out);
            double[] reference = reference(x, w, bias, rows, in, out, activation, bf16);
            assertClose("heuristic " + what, h, reference, tolerance);
            assertClose("measured choice " + what + " (" + engine(tuned, rows, in, out) + ")", t, reference,
                    tolerance);
            assertClose("measured choice against the heuristic's " + what, t, widened(h), tolerance);
            // equal up to the order of additions (split-K kernels add their slices atomically)
            assertClose("the choice on a second stream " + what, s, widened(t), tolerance);
        }
        List<GemmChoice> choices = tuned.gemmChoices();
        assertThat(choices).hasSize(SHAPES.size());
        for (GemmChoice choice : choices) {
            System.out.println("[gemm-tuning] " + choice);
            assertThat(choice.millis()).as(choice.shape()).isPositive();
            assertThat(choice.candidates()).as(choice.shape()).isGreaterThanOrEqualTo(2);
            assertThat(choice.engine()).as(choice.shape()).isNotBlank();
        }
        assertThat(heuristic.gemmChoices()).isEmpty();
        stream.synchronize();
        second.synchronize();
        opened.forEach(CudaTensorOps::close);
        opened.clear();
        assertThat(pool.metrics().allocatedBytes()).as("workspaces back in the pool").isZero();
    }

    @Test
    void everyAlgorithmTheLibraryOffersAndItsTwinComputeTheSameProduct() {
        int rows = 128;
        int in = 768;
        int out = 768;
        List<Matmul> offered = library.candidates(rows, in, out, MatmulLibrary.ElementType.FP32,
                MatmulLibrary.Compute.FP32, MatmulLibrary.Epilogue.BIAS, false, KernelOptions.TUNING_CANDIDATES);
        List<Matmul> twins = new ArrayList<>();
        try {
            assertThat(offered).isNotEmpty().hasSizeLessThanOrEqualTo(KernelOptions.TUNING_CANDIDATES);
            float[] x = randoms(rows * in, 1);
            float[] w = randoms(out * in, 0.05f);
            float[] bias = randoms(out, 1);
            long dx = upload(x);
            long dw = upload(w);
            long db = upload(bias);
            long workspace = allocate(library.workspaceBytes());
            double[] reference = reference(x, w, bias, rows, in, out, Activation.NONE, false);
            for (Matmul plan : offered) {
                Matmul twin = plan.twin();
                twins.add(twin);
                assertThat(library.workspaceBytes(twin)).isEqualTo(library.workspaceBytes(plan));
                assertThat(twin.algorithm()).isEqualTo(plan.algorithm()).startsWith("algo ");
                long y = allocate((long) rows * out * Float.BYTES);
                long yTwin = allocate((long) rows * out * Float.BYTES);
                plan.run(stream, dx, dw, db, y, workspace);
                twin.run(stream, dx, dw, db, yTwin, workspace);
                float[] got = download(y, rows * out);
                assertClose("plan " + plan.algorithm(), got, reference, 2e-5);
                assertClose("twin of " + plan.algorithm(), download(yTwin, rows * out), widened(got), 2e-5);
            }
            System.out.println("[gemm-tuning] 128x768->768 FP32 BIAS offered: "
                    + offered.stream().map(Matmul::algorithm).toList());
        } finally {
            stream.synchronize();
            offered.forEach(Matmul::close);
            twins.forEach(Matmul::close);
        }
    }

    @Test
    void timingEventsMeasureWhatTheStreamRan() {
        long bytes = 256L << 20;
        long block = allocate(bytes);
        double small = stream.timeMillis(() -> stream.fill(block, (byte) 1, 1 << 20));
        double large = stream.timeMillis(() -> {
            for (int i = 0; i < 8; i++) {
                stream.fill(block, (byte) i, bytes);
            }
        });
        assertThat(small).isPositive();
        assertThat(large).as("2 GiB of fills against 1 MiB").isGreaterThan(small * 4);
    }

    private static String engine(CudaTensorOps ops, int rows, int in, int out) {
        String prefix = rows + "x" + in + "->" + out + " ";
        return ops.gemmChoices().stream().filter(c -> c.shape().startsWith(prefix)).map(GemmChoice::engine)
                .findFirst().orElse("no choice");
    }

    private static double[] reference(float[] x, float[] w, float[] bias, int rows, int in, int out,
                                      Activation activation, boolean bf16) {
        double[] expected = new double[rows * out];
        for (int r = 0; r < rows; r++) {
            for (int o = 0; o < out; o++) {
                double sum = bf16 ? bf(bias[o]) : bias[o];
                for (int k = 0; k < in; k++) {
                    sum += bf16 ? bf(x[r * in + k]) * bf(w[o * in + k]) : (double) x[r * in + k] * w[o * in + k];
                }
                expected[r * out + o] = switch (activation) {
                    case NONE -> sum;
                    case GELU -> gelu(sum);
                    case RELU -> Math.max(sum, 0);
                    case TANH -> Math.tanh(sum);
                };
            }
        }
        return expected;
    }

    private static double gelu(double v) {
        return 0.5 * v * (1 + erf(v / Math.sqrt(2)));
    }

    private static double[] widened(float[] values) {
        double[] out = new double[values.length];
        for (int i = 0; i < values.length; i++) {
            out[i] = values[i];
        }
        return out;
    }
}
