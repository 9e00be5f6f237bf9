package io.gpupool.model;

import java.io.ByteArrayOutputStream;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.List;

/**
 * The serialized form of a {@link DataType#BYTES} tensor, the same in memory and in the binary
 * tensor data extension:
 * <pre>
 *   | len0 (4 bytes, LE, unsigned < 2^31) | bytes0 ... | len1 | bytes1 ... | ...
 * </pre>
 * Elements follow each other in row-major order with no padding.
 */
public final class BytesElements {

    private static final ValueLayout.OfInt LENGTH = ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);

    private BytesElements() {
    }

    /**
     * How many whole elements {@code data} holds, reading at most {@code limit + 1} of them; -1 when the
     * data ends inside an element (a length prefix or its bytes cut short).
     */
    public static long count(MemorySegment data, long limit) {
        long at = 0;
        long count = 0;
        long size = data.byteSize();
        while (at < size && count <= limit) {
            if (size - at < Integer.BYTES) {
                return -1;
            }
            int length = data.get(LENGTH, at);
            at += Integer.BYTES;
            if (length < 0 || length > size - at) {
                return -1;
            }
            at += length;
            count++;
        }
        return count;
    }

    /** The elements of {@code data}, which must be well formed (see {@link #count}). */
    public static List<byte[]> decode(MemorySegment data) {
        List<byte[]> elements = new ArrayList<>();
        long at = 0;
        while (at < data.byteSize()) {
            int length = data.get(LENGTH, at);
            at += Integer.BYTES;
            elements.add(data.asSlice(at, length).toArray(ValueLayout.JAVA_BYTE));
            at += length;
        }
        return elements;
    }

    /** The serialized form of {@code elements}. */
    public static byte[] encode(List<byte[]> elements) {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        for (byte[] element : elements) {
            int length = element.length;
            out.write(length);
            out.write(length >>> 8);
            out.write(length >>> 16);
            out.write(length >>> 24);
            out.writeBytes(element);
        }
        return out.toByteArray();
    }
}
