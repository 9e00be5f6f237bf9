package io.gpupool.serving;

import io.gpupool.model.BytesElements;
import io.gpupool.model.DataType;
import tools.jackson.core.JsonGenerator;
import tools.jackson.databind.JsonNode;

import java.io.IOException;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;

/**
 * Converts tensor elements between the protocol's JSON form and the row-major little-endian bytes
 * a {@link io.gpupool.model.HostTensor} holds.
 *
 * <p>JSON data may be flat ({@code [1, 2, 3, 4]}) or nested ({@code [[1, 2], [3, 4]]}); either way the
 * elements are taken in row-major order and their count must equal the product of the shape. FP16
 * and BF16 travel as JSON numbers and are rounded to nearest-even on the way in. BOOL accepts
 * {@code true}/{@code false} (and 0/1); integer types reject fractions and values out of range.
 * BYTES elements are JSON strings, kept as their UTF-8 bytes (and written back as strings).
 */
final class TensorCodec {

    static final ValueLayout.OfShort SHORT = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    static final ValueLayout.OfInt INT = ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    static final ValueLayout.OfLong LONG = ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    static final ValueLayout.OfFloat FLOAT = ValueLayout.JAVA_FLOAT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    static final ValueLayout.OfDouble DOUBLE = ValueLayout.JAVA_DOUBLE_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);

    private TensorCodec() {
    }

    /**
     * Reads the elements of a tensor of {@code shape} and {@code type} from {@code data} into a new
     * byte array.
     *
     * <p>Data is either flat (every element of {@code data} a scalar, as many as the shape holds) or
     * nested exactly as the shape says (depth = rank, each array as long as its dimension); a ragged
     * array is refused even when its element count would fit, since a client that sent it meant another
     * layout than the one it declared.
     *
     * @throws ServingException (400) naming the input when the data is not an array, does not match the
     *                          shape, or holds a value the type cannot represent
     */
    static byte[] fromJson(String input, DataType type, long[] shape, JsonNode data) {
        if (data == null || !data.isArray()) {
            throw ServingException.badRequest("input '" + input + "': 'data' must be a JSON array (or use "
                    + "the binary_data_size parameter)");
        }
        long elementCount = io.gpupool.model.HostTensor.elementCount(shape);
        if (!type.isFixedSize()) {
            List<byte[]> elements = new ArrayList<>();
            walk(input, shape, elementCount, data, (index, node) -> {
                if (!node.isString()) {
                    throw badValue(input, DataType.BYTES, index, node);
                }
                elements.add(node.stringValue().getBytes(StandardCharsets.UTF_8));
            });
            return BytesElements.encode(elements);
        }
        long bytes = elementCount * type.byteSize();
        if (bytes > Integer.MAX_VALUE - 8) {
            throw ServingException.badRequest("input '" + input + "' is too large for JSON data: " + bytes + " bytes");
        }
        byte[] out = new byte[(int) bytes];
        MemorySegment segment = MemorySegment.ofArray(out);
        walk(input, shape, elementCount, data, (index, node) -> write(input, type, segment, index, node));
        return out;
    }

    /** Receives the scalars of a JSON tensor in row-major order. */
    private interface ElementSink {
        void accept(long index, JsonNode node);
    }

    /**
     * Hands every scalar of {@code data} to {@code sink} in row-major order, after checking that the data is flat
     * or nested exactly as {@code shape} (see {@link #fromJson}) and holds exactly {@code elementCount} scalars. A
     * depth-first walk without recursion, so that deep nesting cannot overflow the stack; the stack's size is the
     * depth of the array being walked.
     */
    private static void walk(String input, long[] shape, long elementCount, JsonNode data, ElementSink sink) {
        boolean nested = shape.length > 1 && !data.isEmpty() && data.get(0).isArray();
        if (nested && data.size() != shape[0]) {
            throw notShaped(input, shape);
        }
        long index = 0;
        ArrayDeque<Iterator<JsonNode>> stack = new ArrayDeque<>();
        stack.push(data.iterator());
        while (!stack.isEmpty()) {
            Iterator<JsonNode> level = stack.peek();
            if (!level.hasNext()) {
                stack.pop();
                continue;
            }
            JsonNode node = level.next();
            int depth = stack.size();
            if (node.isArray()) {
                if (!nested || depth >= shape.length || node.size() != shape[depth]) {
                    throw notShaped(input, shape);
                }
                stack.push(node.iterator());
                continue;
            }
            if (nested && depth != shape.length) {
                throw notShaped(input, shape);
            }
            if (index >= elementCount) {
                throw countMismatch(input, elementCount, "more");
            }
            sink.accept(index++, node);
        }
        if (index != elementCount) {
            throw countMismatch(input, elementCount, String.valueOf(index));
        }
    }

    private static ServingException notShaped(String input, long[] shape) {
        return ServingException.badRequest("input '" + input + "': 'data' does not match shape "
                + java.util.Arrays.toString(shape) + "; give it flat (row-major) or nested exactly as the shape");
    }

    /**
     * Refuses binary floating-point data holding NaN or an infinity, the rule JSON data follows too (JSON
     * has no literal for them): a model given one computes garbage without saying so.
     *
     * @throws ServingException (400) naming the input and the first such element
     */
    static void requireFinite(String input, DataType type, byte[] data) {
        MemorySegment segment = MemorySegment.ofArray(data);
        long count = data.length / type.byteSize();
        for (long i = 0; i < count; i++) {
            double value = floatingValue(type, segment, i * type.byteSize());
            if (!Double.isFinite(value)) {
                throw ServingException.badRequest("input '" + input + "': element " + i + " (" + value
                        + ") is not a valid " + type.protocolName() + " value (non-finite numbers are refused)");
            }
        }
    }

    /**
     * The index of the first NaN or infinity in floating-point {@code data}, or -1 (also for every
     * non-floating type).
     */
    static long firstNonFinite(DataType type, MemorySegment data) {
        if (!isFloatingPoint(type)) {
            return -1;
        }
        long count = data.byteSize() / type.byteSize();
        for (long i = 0; i < count; i++) {
            if (!Double.isFinite(floatingValue(type, data, i * type.byteSize()))) {
                return i;
            }
        }
        return -1;
    }

    static boolean isFloatingPoint(DataType type) {
        return type == DataType.FP16 || type == DataType.BF16 || type == DataType.FP32 || type == DataType.FP64;
    }

    private static double floatingValue(DataType type, MemorySegment data, long offset) {
        return switch (type) {
            case FP16 -> Float.float16ToFloat(data.get(SHORT, offset));
            case BF16 -> fromBfloat16(data.get(SHORT, offset));
            case FP32 -> data.get(FLOAT, offset);
            case FP64 -> data.get(DOUBLE, offset);
            default -> 0;
        };
    }

    private static ServingException countMismatch(String input, long expected, String got) {
        return ServingException.badRequest("input '" + input + "': shape needs " + expected
                + " elements but 'data' holds " + got);
    }

    private static void write(String input, DataType type, MemorySegment segment, long index, JsonNode node) {
        long offset = index * type.byteSize();
        switch (type) {
            case BOOL -> {
                boolean value;
                if (node.isBoolean()) {
                    value = node.booleanValue();
                } else if (node.isIntegralNumber() && !node.isBigInteger() && (node.longValue() == 0 || node.longValue() == 1)) {
                    value = node.longValue() == 1;
                } else {
                    throw badValue(input, type, index, node);
                }
                segment.set(ValueLayout.JAVA_BYTE, offset, (byte) (value ? 1 : 0));
            }
            case UINT8 -> segment.set(ValueLayout.JAVA_BYTE, offset, (byte) integral(input, type, index, node, 0, 255));
            case INT8 -> segment.set(ValueLayout.JAVA_BYTE, offset,
                    (byte) integral(input, type, index, node, Byte.MIN_VALUE, Byte.MAX_VALUE));
            case INT16 -> segment.set(SHORT, offset,
                    (short) integral(input, type, index, node, Short.MIN_VALUE, Short.MAX_VALUE));
            case INT32 -> segment.set(INT, offset,
                    (int) integral(input, type, index, node, Integer.MIN_VALUE, Integer.MAX_VALUE));
            case INT64 -> segment.set(LONG, offset, integral(input, type, index, node, Long.MIN_VALUE, Long.MAX_VALUE));
            case FP16 -> segment.set(SHORT, offset, Float.floatToFloat16(floating(input, type, index, node)));
            case BF16 -> segment.set(SHORT, offset, toBfloat16(floating(input, type, index, node)));
            case FP32 -> segment.set(FLOAT, offset, floating(input, type, index, node));
            case FP64 -> {
                double value = node.isNumber() ? doubleOf(node) : Double.NaN;
                if (!Double.isFinite(value)) {
                    throw badValue(input, type, index, node);
                }
                segment.set(DOUBLE, offset, value);
            }
            case BYTES -> throw new IllegalStateException("BYTES elements are strings, read in fromJson");
        }
    }

    private static long integral(String input, DataType type, long index, JsonNode node, long min, long max) {
        if (!node.isIntegralNumber() || node.isBigInteger()) {
            throw badValue(input, type, index, node);
        }
        long value = node.longValue();
        if (value < min || value > max) {
            throw badValue(input, type, index, node);
        }
        return value;
    }

    /** A JSON number within float range (1e999 parses as infinity and is refused, not rounded). */
    private static float floating(String input, DataType type, long index, JsonNode node) {
        if (!node.isNumber()) {
            throw badValue(input, type, index, node);
        }
        double value = doubleOf(node);
        if (!Double.isFinite(value) || Math.abs(value) > Float.MAX_VALUE) {
            throw badValue(input, type, index, node);
        }
        return (float) value;
    }

    /**
     * A JSON number as the nearest double, an infinity beyond double's range: an integer too long for a long
     * arrives as a big integer, which Jackson refuses to convert when the double would not hold it exactly.
     */
    private static double doubleOf(JsonNode number) {
        if (number.isBigInteger()) {
            return number.bigIntegerValue().doubleValue();
        }
        if (number.isBigDecimal()) {
            return number.decimalValue().doubleValue();
        }
        return number.doubleValue();
    }

    private static ServingException badValue(String input, DataType type, long index, JsonNode node) {
        // a number beyond a double's range was read as an infinity, which Jackson writes as a string
        String shown = node.isNumber() && !Double.isFinite(doubleOf(node)) ? "a number beyond any double's range"
                : node.toString();
        if (shown.length() > 40) {
            shown = shown.substring(0, 40) + "...";
        }
        return ServingException.badRequest("input '" + input + "': element " + index + " (" + shown
                + ") is not a valid " + type.protocolName() + " value");
    }

    /** Rounds a float to bfloat16 (nearest, ties to even); NaN stays a quiet NaN. */
    static short toBfloat16(float value) {
        int bits = Float.floatToRawIntBits(value);
        if (Float.isNaN(value)) {
            return (short) ((bits >>> 16) | 0x0040);
        }
        int rounding = 0x7FFF + ((bits >>> 16) & 1);
        return (short) ((bits + rounding) >>> 16);
    }

    static float fromBfloat16(short bits) {
        return Float.intBitsToFloat((bits & 0xFFFF) << 16);
    }

    /**
     * Writes the elements of {@code data} as a flat JSON array (the protocol's row-major form).
     *
     * @param out where {@code json} writes to: float arrays go there directly, after the generator's buffer
     */
    static void writeJson(JsonGenerator json, OutputStream out, DataType type, MemorySegment data) {
        if (!type.isFixedSize()) {
            json.writeStartArray();
            for (byte[] element : BytesElements.decode(data)) {
                json.writeString(new String(element, StandardCharsets.UTF_8));
            }
            json.writeEndArray();
            return;
        }
        long count = data.byteSize() / type.byteSize();
        if (type == DataType.FP32 || type == DataType.FP16 || type == DataType.BF16) {
            writeFloats(json, out, type, data, count);
            return;
        }
        json.writeStartArray();
        for (long i = 0; i < count; i++) {
            long offset = i * type.byteSize();
            switch (type) {
                case BOOL -> json.writeBoolean(data.get(ValueLayout.JAVA_BYTE, offset) != 0);
                case UINT8 -> json.writeNumber(data.get(ValueLayout.JAVA_BYTE, offset) & 0xFF);
                case INT8 -> json.writeNumber(data.get(ValueLayout.JAVA_BYTE, offset));
                case INT16 -> json.writeNumber(data.get(SHORT, offset));
                case INT32 -> json.writeNumber(data.get(INT, offset));
                case INT64 -> json.writeNumber(data.get(LONG, offset));
                case FP16 -> json.writeNumber(Float.float16ToFloat(data.get(SHORT, offset)));
                case BF16 -> json.writeNumber(fromBfloat16(data.get(SHORT, offset)));
                case FP32 -> json.writeNumber(data.get(FLOAT, offset));
                case FP64 -> json.writeNumber(data.get(DOUBLE, offset));
                case BYTES -> throw new IllegalStateException("BYTES is written above");
            }
        }
        json.writeEndArray();
    }

    /**
     * A float tensor as a JSON array of {@link Float#toString}'s text ({@link FloatText}), which is what the
     * generator's {@code writeNumber(float)} writes too, separated by commas. The text goes to {@code out} as ASCII
     * bytes a few thousand at a time, between the generator's {@code [} (flushed first) and its {@code ]}: through
     * the generator each number would become a String and have its state checked, or, as raw text, every character
     * would be widened to a char and encoded back to UTF-8, each costing about as much as the conversion itself,
     * and responses of embeddings carry thousands of numbers. The generator sees an empty array, so the object
     * around it goes on as after any value. The caller has refused non-finite values ({@link #firstNonFinite}),
     * which JSON cannot hold.
     */
    private static void writeFloats(JsonGenerator json, OutputStream out, DataType type, MemorySegment data,
                                    long count) {
        json.writeStartArray();
        json.flush();
        int room = FloatText.MAX_CHARS + 1;                                  // a comma and a number
        byte[] text = new byte[(int) Math.min(FLOAT_CHUNK_BYTES + room, count * room)];
        int at = 0;
        try {
            for (long i = 0; i < count; i++) {
                if (i > 0) {
                    text[at++] = ',';
                }
                long offset = i * type.byteSize();
                at = FloatText.append(switch (type) {
                    case FP16 -> Float.float16ToFloat(data.get(SHORT, offset));
                    case BF16 -> fromBfloat16(data.get(SHORT, offset));
                    default -> data.get(FLOAT, offset);
                }, text, at);
                if (at > text.length - room || i == count - 1) {
                    out.write(text, 0, at);
                    at = 0;
                }
            }
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        json.writeEndArray();
    }

    /** Bytes of float text collected before they go out. */
    private static final int FLOAT_CHUNK_BYTES = 8192;
}
