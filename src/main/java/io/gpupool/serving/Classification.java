package io.gpupool.serving;

import io.gpupool.model.BytesElements;
import io.gpupool.model.DataType;
import io.gpupool.model.HostTensor;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.List;
import java.util.PriorityQueue;

/**
 * The classification extension of the inference protocol: a client that asks for an output with
 * {@code "parameters": {"classification": k}} gets, instead of the output's values, its {@code k} largest values
 * per row as text, each with the index it stood at and, where the model names its classes, the class's name.
 *
 * <pre>
 *   output of a batching model [B, d1, ..., dn]: B rows of C = d1·…·dn values (an output [B] has C = 1)
 *   output of a model that does not batch [d1, ..., dn]: one row of all its values
 *
 *   row [0.02, 0.91, 0.07]  (C = 3, labels setosa, versicolor, virginica), k = 2
 *     -> ["0.91:1:versicolor", "0.07:2:virginica"]        "value:index" where the model names no classes
 *
 *   result: BYTES [B, min(k, C)], or [min(k, C)] for a model that does not batch
 * </pre>
 * Within a row the values are ordered largest first, equal values by lower index first; a {@code k} above the
 * row's length returns the whole row. A value is written as the response would write it in JSON ({@link
 * Float#toString} for the float types, the integer for integer types). Each row is selected with a heap of {@code
 * k} entries, so an output of many values per row (a sequence of embeddings) costs {@code C·log k}, not a sort.
 */
final class Classification {

    private Classification() {
    }

    /**
     * The top {@code k} of {@code tensor}'s rows as the extension's BYTES tensor of the same name.
     *
     * @param batched whether dimension 0 of the output is the batch (each of its rows classified on its own)
     * @param labels  the classes' names in index order; used only where it names every index of a row
     */
    static HostTensor topK(HostTensor tensor, int k, boolean batched, List<String> labels) {
        if (k < 1) {
            throw new IllegalArgumentException("classification needs k >= 1, was " + k);
        }
        DataType type = tensor.dataType();
        if (!type.isFixedSize()) {
            throw new IllegalArgumentException("output '" + tensor.name() + "' is BYTES; only numbers are classified");
        }
        long[] shape = tensor.shape();
        long elements = tensor.elementCount();
        long rows = batched && shape.length > 0 ? shape[0] : 1;
        long perRow = rows == 0 ? 0 : elements / rows;
        int kept = (int) Math.min(k, perRow);
        boolean named = !labels.isEmpty() && labels.size() == perRow;
        MemorySegment data = tensor.data();
        Comparator<Long> smallestFirst = (a, b) -> compare(type, data, a, b);
        List<byte[]> results = new ArrayList<>((int) Math.min(rows * kept, Integer.MAX_VALUE));
        for (long row = 0; row < rows; row++) {
            long first = row * perRow;
            PriorityQueue<Long> largest = new PriorityQueue<>(kept + 1, smallestFirst);
            for (long i = first; i < first + perRow; i++) {
                largest.add(i);
                if (largest.size() > kept) {
                    largest.poll();
                }
            }
            Long[] chosen = largest.toArray(new Long[0]);
            Arrays.sort(chosen, smallestFirst.reversed());
            for (Long index : chosen) {
                long inRow = index - first;
                String text = valueText(type, data, index) + ":" + inRow + (named ? ":" + labels.get((int) inRow) : "");
                results.add(text.getBytes(StandardCharsets.UTF_8));
            }
        }
        long[] resultShape = batched && shape.length > 0 ? new long[] {rows, kept} : new long[] {kept};
        return new HostTensor(tensor.name(), DataType.BYTES, resultShape,
                MemorySegment.ofArray(BytesElements.encode(results)));
    }

    /** Orders two elements by value, smaller first; of equal values the higher index counts as smaller. */
    private static int compare(DataType type, MemorySegment data, long a, long b) {
        int byValue = TensorCodec.isFloatingPoint(type)
                ? Double.compare(floating(type, data, a), floating(type, data, b))
                : Long.compare(integral(type, data, a), integral(type, data, b));
        return byValue != 0 ? byValue : Long.compare(b, a);
    }

    private static String valueText(DataType type, MemorySegment data, long index) {
        return switch (type) {
            case FP64 -> Double.toString(floating(type, data, index));
            case FP16, BF16, FP32 -> Float.toString((float) floating(type, data, index));
            default -> Long.toString(integral(type, data, index));
        };
    }

    private static double floating(DataType type, MemorySegment data, long index) {
        long offset = index * type.byteSize();
        return switch (type) {
            case FP16 -> Float.float16ToFloat(data.get(TensorCodec.SHORT, offset));
            case BF16 -> TensorCodec.fromBfloat16(data.get(TensorCodec.SHORT, offset));
            case FP32 -> data.get(TensorCodec.FLOAT, offset);
            case FP64 -> data.get(TensorCodec.DOUBLE, offset);
            default -> throw new IllegalStateException(type + " is not a float type");
        };
    }

    private static long integral(DataType type, MemorySegment data, long index) {
        long offset = index * type.byteSize();
        return switch (type) {
            case BOOL, INT8 -> data.get(ValueLayout.JAVA_BYTE, offset);
            case UINT8 -> data.get(ValueLayout.JAVA_BYTE, offset) & 0xFF;
            case INT16 -> data.get(TensorCodec.SHORT, offset);
            case INT32 -> data.get(TensorCodec.INT, offset);
            case INT64 -> data.get(TensorCodec.LONG, offset);
            default -> throw new IllegalStateException(type + " is not an integer type");
        };
    }
}
