package io.gpupool.serving;

/**
 * {@link Float#toString}'s text of a float, as ASCII bytes written into a caller's buffer: what the JSON generator's
 * {@code writeNumber(float)} writes, for responses that carry thousands of numbers.
 *
 * <p>Models whose activations are bfloat16 widen their outputs to FP32 on the device, so each such float has its
 * low 16 bits zero: one of 65 536 values. Their texts are made once, on first use, and kept side by side:
 * <pre>
 *   TEXT    [ "0.0" | "9.18355E-41" | ... | "1.0" | ... ]          every text, ASCII, in bit-pattern order
 *   START   [ 0, 3, 14, ... ]   65 537 offsets: the text of bits b&lt;&lt;16 is TEXT[START[b] .. START[b+1])
 * </pre>
 * (built once, by 65 536 calls of {@link Float#toString}). Any other float is formatted by {@link Float#toString}
 * as it comes. Either way the bytes are exactly that method's text.
 */
final class FloatText {

    /** The longest text {@link Float#toString} writes for a finite float ("-1.17549435E-38"). */
    static final int MAX_CHARS = 15;

    private FloatText() {
    }

    /**
     * Writes {@code value}'s text at {@code at}; {@code into} must have {@link #MAX_CHARS} bytes free there.
     *
     * @return the position after the text
     */
    static int append(float value, byte[] into, int at) {
        int bits = Float.floatToRawIntBits(value);
        if ((bits & 0xFFFF) == 0) {
            Bf16 table = Bf16.TABLE;
            int upper = bits >>> 16;
            int start = table.start[upper];
            int length = table.start[upper + 1] - start;
            System.arraycopy(table.text, start, into, at, length);
            return at + length;
        }
        String text = Float.toString(value);
        for (int i = 0; i < text.length(); i++) {
            into[at + i] = (byte) text.charAt(i);          // ASCII only: digits, '.', '-', 'E'
        }
        return at + text.length();
    }

    /** The texts of every float with its low 16 bits zero, made when first used (the holder idiom). */
    private static final class Bf16 {

        static final Bf16 TABLE = new Bf16();

        final byte[] text;
        final int[] start = new int[(1 << 16) + 1];

        private Bf16() {
            StringBuilder all = new StringBuilder(1 << 20);
            for (int upper = 0; upper < 1 << 16; upper++) {
                start[upper] = all.length();
                all.append(Float.intBitsToFloat(upper << 16));
            }
            start[1 << 16] = all.length();
            text = new byte[all.length()];
            for (int i = 0; i < text.length; i++) {
                text[i] = (byte) all.charAt(i);
            }
        }
    }
}
