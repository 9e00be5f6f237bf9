package io.gpupool.model;

import java.util.Arrays;

/**
 * A model input or output as its metadata declares it; {@code -1} in {@code shape} marks a variable
 * dimension (batch, sequence length).
 */
public record TensorSpec(String name, DataType dataType, long[] shape) {

    public TensorSpec {
        shape = shape.clone();
    }

    @Override
    public long[] shape() {
        return shape.clone();
    }

    @Override
    public boolean equals(Object other) {
        return other instanceof TensorSpec that && name.equals(that.name) && dataType == that.dataType
                && Arrays.equals(shape, that.shape);
    }

    @Override
    public int hashCode() {
        return 31 * (31 * name.hashCode() + dataType.hashCode()) + Arrays.hashCode(shape);
    }

    @Override
    public String toString() {
        return name + ":" + dataType + Arrays.toString(shape);
    }
}
