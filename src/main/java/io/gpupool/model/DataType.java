package io.gpupool.model;

/**
 * Tensor element types, named as the Open Inference Protocol names them. {@link #BYTES} elements have
 * no fixed size: a BYTES tensor's data is its elements in row-major order, each a 4-byte little-endian
 * length followed by that many bytes (the binary tensor data extension's layout; see {@link BytesElements}).
 */
public enum DataType {
    BOOL(1), UINT8(1), INT8(1), INT16(2), INT32(4), INT64(8), FP16(2), BF16(2), FP32(4), FP64(8), BYTES(0);

    private final int byteSize;

    DataType(int byteSize) {
        this.byteSize = byteSize;
    }

    /** Bytes per element; 0 for {@link #BYTES}, whose elements vary in size. */
    public int byteSize() {
        return byteSize;
    }

    /** False for {@link #BYTES} only. */
    public boolean isFixedSize() {
        return byteSize > 0;
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
