package io.gpupool.serving;

import org.junit.jupiter.api.Test;

import java.nio.charset.StandardCharsets;
import java.util.SplittableRandom;

import static org.assertj.core.api.Assertions.assertThat;

/** {@link FloatText} writes exactly {@link Float#toString}'s text, from its table and without it. */
class FloatTextTest {

    static String written(float value) {
        byte[] buffer = new byte[3 + FloatText.MAX_CHARS];
        buffer[0] = 'x';
        buffer[1] = 'y';
        int end = FloatText.append(value, buffer, 2);
        return new String(buffer, 2, end - 2, StandardCharsets.US_ASCII);
    }

    @Test
    void everyBfloat16ValueIsWrittenAsFloatToStringWritesIt() {
        for (int upper = 0; upper < 1 << 16; upper++) {
            float value = Float.intBitsToFloat(upper << 16);
            assertThat(written(value)).as("bits 0x%04x0000", upper).isEqualTo(Float.toString(value));
        }
    }

    @Test
    void otherFloatsAreWrittenAsFloatToStringWritesThem() {
        SplittableRandom random = new SplittableRandom(16);
        for (int i = 0; i < 200_000; i++) {
            float value = Float.intBitsToFloat(random.nextInt());
            if (Float.isFinite(value)) {
                assertThat(written(value)).as("bits 0x%08x", Float.floatToRawIntBits(value))
                        .isEqualTo(Float.toString(value));
            }
        }
        for (float value : new float[]{-Float.MIN_NORMAL, -1.1754942E-38f, Float.MIN_VALUE, -Float.MAX_VALUE, 0.1f,
                1e7f}) {
            assertThat(written(value)).isEqualTo(Float.toString(value));
            assertThat(Float.toString(value).length()).isLessThanOrEqualTo(FloatText.MAX_CHARS);
        }
    }

    @Test
    void theBytesBeforeTheTextAreLeftAlone() {
        byte[] buffer = new byte[2 + FloatText.MAX_CHARS];
        buffer[0] = '[';
        buffer[1] = ',';
        int end = FloatText.append(-0.5f, buffer, 2);
        assertThat(new String(buffer, 0, end, StandardCharsets.US_ASCII)).isEqualTo("[,-0.5");
    }
}
