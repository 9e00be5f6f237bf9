package io.gpupool.model;

/**
 * FP32 ↔ bf16 on the host. bf16 is the upper half of an FP32 bit pattern (sign, 8 exponent bits, 7 mantissa bits);
 * narrowing rounds to nearest, ties to even, as the device's {@code __float2bfloat16_rn} does, and keeps NaN a NaN.
 */
public final class Bf16 {

    private Bf16() {
    }

    /** The bf16 nearest to {@code value} (ties to even), as its 16 bits. */
    public static short fromFloat(float value) {
        int bits = Float.floatToRawIntBits(value);
        if ((bits & 0x7fffffff) > 0x7f800000) {
            return (short) ((bits >>> 16) | 0x0040);   // NaN stays NaN (quiet bit set)
        }
        int rounding = 0x7fff + ((bits >>> 16) & 1);
        return (short) ((bits + rounding) >>> 16);
    }

    /** The FP32 value of bf16 bits {@code bits} (exact). */
    public static float toFloat(short bits) {
        return Float.intBitsToFloat((bits & 0xffff) << 16);
    }
}
