package io.gpupool.model;

import java.lang.foreign.MemorySegment;
import java.util.Arrays;

/**
 * A tensor in host memory: row-major, little-endian elements in {@code data}, whose byte size is
 * exactly the element count times the element size; for {@link DataType#BYTES}, exactly element-count
 * length-prefixed elements ({@link BytesElements}).
 */
public record HostTensor(String name, DataType dataType, long[] shape, MemorySegment data) {

    public HostTensor {
        shape = shape.clone();
        if (!dataType.isFixedSize()) {
            long elements = elementCount(shape);
            long found = BytesElements.count(data, elements);
            if (found != elements) {
                throw new IllegalArgumentException("tensor '" + name + "' of shape " + Arrays.toString(shape)
                        + " needs " + elements + " BYTES elements, its data holds " + found);
            }
        } else {
            long expected = elementCount(shape) * dataType.byteSize();
            if (data.byteSize() != expected) {
                throw new IllegalArgumentException("tensor '" + name + "' of shape " + Arrays.toString(shape)
                        + " and type " + dataType + " needs " + expected + " bytes of data, got " + data.byteSize());
            }
        }
    }

    @Override
    public long[] shape() {
        return shape.clone();
    }

    public long elementCount() {
        return elementCount(shape);
    }

    /** Product of the dimensions; fails on a negative dimension or overflow. */
    public static long elementCount(long[] shape) {
        long count = 1;
        for (long dimension : shape) {
            if (dimension < 0) {
                throw new IllegalArgumentException("negative dimension in shape " + Arrays.toString(shape));
            }
            count = Math.multiplyExact(count, dimension);
        }
        return count;
    }
}
