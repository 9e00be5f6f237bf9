package io.gpupool.model;

/** Tensor element types, named as the Open Inference Protocol names them. */
public enum DataType {
    BOOL(1), UINT8(1), INT8(1), INT16(2), INT32(4), INT64(8), FP16(2), BF16(2), FP32(4), FP64(8);

    private final int byteSize;

    DataType(int byteSize) {
        this.byteSize = byteSize;
    }

    /** Bytes per element. */
    public int byteSize() {
        return byteSize;
    }

    /** The protocol's name ("FP32", ...). */
    public String protocolName() {
        return name();
    }

    /** Parses a protocol datatype name; fails with a message listing the supported names. */
    public static DataType fromProtocolName(String name) {
        for (DataType type : values()) {
            if (type.name().equals(name)) {
                return type;
            }
        }
        throw new IllegalArgumentException("unsupported datatype '" + name + "', expected one of "
                + java.util.Arrays.toString(values()));
    }
}
