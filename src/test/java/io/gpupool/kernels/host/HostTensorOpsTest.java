package io.gpupool.kernels.host;

import io.gpupool.kernels.TensorOps.Activation;
import io.gpupool.model.testing.TestStream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Random;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

class HostTensorOpsTest {

    @ParameterizedTest
    @CsvSource({
            "0.0, 0.0",
            "0.1, 0.1124629160182849",
            "0.5, 0.5204998778130465",
            "1.0, 0.8427007929497149",
            "1.5, 0.9661051464753108",
            "2.0, 0.9953222650189527",
            "2.4999, 0.9995928300996666",
            "2.5, 0.9995930479825550",
            "3.0, 0.9999779095030014",
            "4.0, 0.9999999845827421",
            "5.9, 0.9999999999999999",
            "-1.0, -0.8427007929497149",
    })
    void erfMatchesTabulatedValues(double x, double expected) {
        assertThat(HostTensorOps.erf(x)).isCloseTo(expected, within(1e-12));
    }

    @Test
    void erfIsContinuousWhereItsMethodChanges() {
        assertThat(HostTensorOps.erf(Math.nextDown(2.5))).isCloseTo(HostTensorOps.erf(2.5), within(1e-14));
        assertThat(HostTensorOps.erf(Math.nextDown(6.0))).isCloseTo(1.0, within(1e-15));
    }

    @Test
    void geluIsTheErfForm() {
        assertThat(HostTensorOps.gelu(1.0f)).isCloseTo(0.8413447460685429f, within(1e-7f));
        assertThat(HostTensorOps.gelu(-0.5f)).isCloseTo(-0.15426876936299347f, within(1e-7f));
    }

    @ParameterizedTest
    @CsvSource({"1, 1, 1", "3, 5, 7", "4, 256, 256", "37, 300, 530", "9, 64, 1000"})
    void gemmMatchesAPlainTripleLoopForEveryActivation(int rows, int in, int out) {
        Random random = new Random(rows * 31L + in * 7L + out);
        try (Arena arena = Arena.ofShared()) {
            float[] x = randoms(random, rows * in);
            float[] w = randoms(random, out * in);
            float[] b = randoms(random, out);
            for (Activation activation : Activation.values()) {
                MemorySegment y = arena.allocate((long) rows * out * 4);
                HostTensorOps.gemm(segment(arena, x), segment(arena, w), segment(arena, b), y, rows, in, out, activation);
                float[] actual = y.toArray(ValueLayout.JAVA_FLOAT);
                for (int r = 0; r < rows; r++) {
                    for (int o = 0; o < out; o++) {
                        double sum = b[o];
                        for (int k = 0; k < in; k++) {
                            sum += (double) x[r * in + k] * w[o * in + k];
                        }
                        double expected = switch (activation) {
                            case NONE -> sum;
                            case RELU -> Math.max(sum, 0);
                            case TANH -> Math.tanh(sum);
                            case GELU -> 0.5 * sum * (1 + HostTensorOps.erf(sum / Math.sqrt(2)));
                        };
                        assertThat((double) actual[r * out + o]).as("%s y[%d,%d]", activation, r, o)
                                .isCloseTo(expected, within(1e-5 * Math.sqrt(in) + 1e-6));
                    }
                }
            }
        }
    }

    /**
     * A CUDA graph's padding of a packed batch (model/bert/PackedPadding): empty sequences pool to zeros, and rows past
     * the last offset belong to no sequence, so attention leaves their context as it was.
     */
    @Test
    void packedOpsTakeEmptySequencesAndRowsInNoSequence() {
        HostTensorOps ops = new HostTensorOps();
        int heads = 1;
        int headDim = 2;
        int tokens = 5;
        try (Arena arena = Arena.ofShared(); TestStream stream = new TestStream(0)) {
            Random random = new Random(3);
            MemorySegment qkv = segment(arena, randoms(random, tokens * 3 * headDim));
            MemorySegment offsets = arena.allocate(5 * Integer.BYTES);
            MemorySegment.copy(new int[] {0, 2, 3, 3, 3}, 0, offsets, ValueLayout.JAVA_INT, 0, 5); // rows 3, 4: none
            float[] sentinel = new float[tokens * headDim];
            java.util.Arrays.fill(sentinel, 42f);
            MemorySegment context = segment(arena, sentinel);
            ops.varlenAttention(stream, qkv.address(), 0, offsets.address(), context.address(), 4, tokens, 3, heads,
                    headDim);
            float[] hidden = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
            MemorySegment rows = segment(arena, hidden);
            MemorySegment cls = segment(arena, new float[] {-1, -1, -1, -1, -1, -1, -1, -1});
            MemorySegment mean = segment(arena, new float[] {-1, -1, -1, -1, -1, -1, -1, -1});
            ops.packedPool(stream, rows.address(), 0, offsets.address(), cls.address(), 4, tokens, 2,
                    io.gpupool.kernels.TensorOps.Pooling.CLS);
            ops.packedPool(stream, rows.address(), 0, offsets.address(), mean.address(), 4, tokens, 2,
                    io.gpupool.kernels.TensorOps.Pooling.MEAN);
            stream.synchronize();

            float[] attended = context.toArray(ValueLayout.JAVA_FLOAT);
            for (int i = 0; i < 3 * headDim; i++) {
                assertThat(attended[i]).as("context of a sequence's row").isNotEqualTo(42f);
            }
            for (int i = 3 * headDim; i < tokens * headDim; i++) {
                assertThat(attended[i]).as("context of a row in no sequence").isEqualTo(42f);
            }
            assertThat(cls.toArray(ValueLayout.JAVA_FLOAT)).containsExactly(1, 2, 5, 6, 0, 0, 0, 0);
            assertThat(mean.toArray(ValueLayout.JAVA_FLOAT)).containsExactly(2, 3, 5, 6, 0, 0, 0, 0);
        }
    }

    private static float[] randoms(Random random, int n) {
        float[] values = new float[n];
        for (int i = 0; i < n; i++) {
            values[i] = (float) random.nextGaussian();
        }
        return values;
    }

    private static MemorySegment segment(Arena arena, float[] values) {
        MemorySegment segment = arena.allocate((long) values.length * 4);
        MemorySegment.copy(values, 0, segment, ValueLayout.JAVA_FLOAT, 0, values.length);
        return segment;
    }
}
