package io.gpupool.model.safetensors;

import tools.jackson.core.JacksonException;
import tools.jackson.core.StreamReadFeature;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.json.JsonMapper;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * A safetensors file, memory-mapped read-only, its header parsed and checked once when opened.
 *
 * <pre>
 *   offset 0        8                      8 + N                                   file size
 *          +--------+----------------------+-------------------------------------------+
 *          | N (u64 | header: N bytes of   | data region: tensor bytes, little endian, |
 *          |  LE)   | UTF-8 JSON           | row-major; offsets below are relative to  |
 *          |        |                      | the start of this region                  |
 *          +--------+----------------------+-------------------------------------------+
 *
 *   header = { "__metadata__": {string: string},                 (optional)
 *              "&lt;tensor&gt;": {"dtype": "F32", "shape": [d0, d1, ...], "data_offsets": [begin, end]}, ... }
 * </pre>
 *
 * Checks made at open, each failing with a {@link SafetensorsFormatException} naming the file and tensor:
 * <ol>
 *   <li>the file holds the 8-byte length and the N header bytes it announces (else: truncated);</li>
 *   <li>the header is a JSON object whose entries have a known dtype, a shape of non-negative
 *       integers and two offsets {@code 0 <= begin <= end};</li>
 *   <li>{@code end} lies inside the data region (else: truncated, or the header lies);</li>
 *   <li>{@code end - begin} equals the shape's element count times the dtype's size;</li>
 *   <li>sorted by {@code begin}, no tensor overlaps the next.</li>
 * </ol>
 * After that every read is a plain bounds-checked copy out of the mapping.
 */
public final class SafetensorsFile implements AutoCloseable {

    /** A header larger than this is refused before it is read (real headers are kilobytes). */
    static final long MAX_HEADER_BYTES = 100L << 20;

    /** A tensor or key given twice is refused: which offsets hold the tensor would otherwise be a guess. */
    private static final JsonMapper JSON = JsonMapper.builder()
            .enable(StreamReadFeature.STRICT_DUPLICATE_DETECTION).build();
    private static final ValueLayout.OfFloat F32 = ValueLayout.JAVA_FLOAT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfDouble F64 = ValueLayout.JAVA_DOUBLE_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfShort I16 = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfInt I32 = ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfLong I64 = ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);

    /** Element types a safetensors header may name. */
    public enum DType {
        F64(8), F32(4), F16(2), BF16(2), I64(8), I32(4), I16(2), I8(1), U8(1), BOOL(1);

        private final int byteSize;

        DType(int byteSize) {
            this.byteSize = byteSize;
        }

        public int byteSize() {
            return byteSize;
        }

        /** Whether {@link #readFp32} can convert this type. */
        public boolean isFloatingPoint() {
            return this == F64 || this == F32 || this == F16 || this == BF16;
        }
    }

    /** One header entry; {@code begin}/{@code end} are relative to the data region. */
    public record TensorInfo(String name, DType dtype, long[] shape, long begin, long end) {
        public TensorInfo {
            shape = shape.clone();
        }

        @Override
        public long[] shape() {
            return shape.clone();
        }

        public long elementCount() {
            long count = 1;
            for (long d : shape) {
                count *= d;
            }
            return count;
        }

        public long byteSize() {
            return end - begin;
        }
    }

    private final Path path;
    private final Arena arena;
    private final MemorySegment data;
    private final Map<String, TensorInfo> tensors;
    private final Map<String, String> metadata;

    private SafetensorsFile(Path path, Arena arena, MemorySegment data, Map<String, TensorInfo> tensors,
                            Map<String, String> metadata) {
        this.path = path;
        this.arena = arena;
        this.data = data;
        this.tensors = tensors;
        this.metadata = metadata;
    }

    /** Maps {@code path} and checks its header; fails with {@link SafetensorsFormatException} on any inconsistency. */
    public static SafetensorsFile open(Path path) {
        Arena arena = Arena.ofShared();
        try (FileChannel channel = FileChannel.open(path, StandardOpenOption.READ)) {
            long size = channel.size();
            MemorySegment file = size == 0 ? MemorySegment.NULL.reinterpret(0)
                    : channel.map(FileChannel.MapMode.READ_ONLY, 0, size, arena);
            SafetensorsFile opened = parse(path, arena, file);
            return opened;
        } catch (IOException e) {
            arena.close();
            throw new SafetensorsFormatException(path + ": cannot read: " + e.getMessage(), e);
        } catch (RuntimeException e) {
            arena.close();
            throw e;
        }
    }

    private static SafetensorsFile parse(Path path, Arena arena, MemorySegment file) {
        long size = file.byteSize();
        if (size < 8) {
            throw fail(path, "truncated: the file has " + size + " bytes, fewer than the 8-byte header length");
        }
        long headerLength = file.get(I64, 0);
        if (headerLength < 2 || headerLength > MAX_HEADER_BYTES) {
            throw fail(path, "header length " + Long.toUnsignedString(headerLength)
                    + " is outside [2, " + MAX_HEADER_BYTES + "]: not a safetensors file");
        }
        if (headerLength > size - 8) {
            throw fail(path, "truncated: the header announces " + headerLength + " bytes but only "
                    + (size - 8) + " follow the length");
        }
        byte[] headerBytes = file.asSlice(8, headerLength).toArray(ValueLayout.JAVA_BYTE);
        JsonNode header;
        try {
            header = JSON.readTree(new String(headerBytes, StandardCharsets.UTF_8));
        } catch (JacksonException e) {
            throw fail(path, "header is not valid JSON: " + e.getOriginalMessage());
        }
        if (header == null || !header.isObject()) {
            throw fail(path, "header is not a JSON object");
        }
        MemorySegment data = file.asSlice(8 + headerLength);
        long dataSize = data.byteSize();
        Map<String, TensorInfo> tensors = new LinkedHashMap<>();
        Map<String, String> metadata = new LinkedHashMap<>();
        for (Map.Entry<String, JsonNode> entry : header.properties()) {
            String name = entry.getKey();
            JsonNode node = entry.getValue();
            if (name.equals("__metadata__")) {
                if (!node.isObject()) {
                    throw fail(path, "__metadata__ is not an object");
                }
                for (Map.Entry<String, JsonNode> m : node.properties()) {
                    metadata.put(m.getKey(), m.getValue().asString());
                }
                continue;
            }
            tensors.put(name, parseEntry(path, name, node, dataSize));
        }
        checkOverlaps(path, tensors.values());
        return new SafetensorsFile(path, arena, data, Collections.unmodifiableMap(tensors),
                Collections.unmodifiableMap(metadata));
    }

    private static TensorInfo parseEntry(Path path, String name, JsonNode node, long dataSize) {
        if (!node.isObject()) {
            throw fail(path, "tensor '" + name + "': header entry is not an object");
        }
        JsonNode dtypeNode = node.get("dtype");
        DType dtype;
        try {
            dtype = DType.valueOf(dtypeNode == null ? "" : dtypeNode.asString());
        } catch (IllegalArgumentException e) {
            throw fail(path, "tensor '" + name + "': dtype " + dtypeNode + " is not one of "
                    + Arrays.toString(DType.values()));
        }
        JsonNode shapeNode = node.get("shape");
        if (shapeNode == null || !shapeNode.isArray()) {
            throw fail(path, "tensor '" + name + "': shape is missing or not an array");
        }
        long[] shape = new long[shapeNode.size()];
        long elements = 1;
        for (int i = 0; i < shape.length; i++) {
            JsonNode d = shapeNode.get(i);
            if (!d.isIntegralNumber() || d.isBigInteger() || d.longValue() < 0) {
                throw fail(path, "tensor '" + name + "': shape " + shapeNode + " has a dimension that is not a non-negative integer");
            }
            shape[i] = d.longValue();
            try {
                elements = Math.multiplyExact(elements, shape[i]);
            } catch (ArithmeticException e) {
                throw fail(path, "tensor '" + name + "': shape " + shapeNode + " overflows");
            }
        }
        JsonNode offsets = node.get("data_offsets");
        if (offsets == null || !offsets.isArray() || offsets.size() != 2
                || !offsets.get(0).isIntegralNumber() || !offsets.get(1).isIntegralNumber()
                || offsets.get(0).isBigInteger() || offsets.get(1).isBigInteger()) {
            throw fail(path, "tensor '" + name + "': data_offsets " + offsets + " is not a pair of integers");
        }
        long begin = offsets.get(0).longValue();
        long end = offsets.get(1).longValue();
        if (begin < 0 || end < begin) {
            throw fail(path, "tensor '" + name + "': data_offsets [" + begin + ", " + end + "] is not an ordered pair of non-negative offsets");
        }
        if (end > dataSize) {
            throw fail(path, "tensor '" + name + "': data_offsets [" + begin + ", " + end + "] end past the data region of "
                    + dataSize + " bytes (truncated file or a header that lies)");
        }
        long expected;
        try {
            expected = Math.multiplyExact(elements, dtype.byteSize());
        } catch (ArithmeticException e) {
            throw fail(path, "tensor '" + name + "': shape " + shapeNode + " overflows");
        }
        if (end - begin != expected) {
            throw fail(path, "tensor '" + name + "': " + dtype + Arrays.toString(shape) + " needs " + expected
                    + " bytes but data_offsets [" + begin + ", " + end + "] span " + (end - begin));
        }
        return new TensorInfo(name, dtype, shape, begin, end);
    }

    private static void checkOverlaps(Path path, java.util.Collection<TensorInfo> infos) {
        List<TensorInfo> sorted = new ArrayList<>(infos);
        sorted.removeIf(t -> t.byteSize() == 0);
        sorted.sort(Comparator.comparingLong(TensorInfo::begin));
        for (int i = 1; i < sorted.size(); i++) {
            TensorInfo previous = sorted.get(i - 1);
            TensorInfo current = sorted.get(i);
            if (current.begin() < previous.end()) {
                throw fail(path, "tensors '" + previous.name() + "' [" + previous.begin() + ", " + previous.end()
                        + ") and '" + current.name() + "' [" + current.begin() + ", " + current.end() + ") overlap");
            }
        }
    }

    private static SafetensorsFormatException fail(Path path, String what) {
        return new SafetensorsFormatException(path + ": " + what);
    }

    public Path path() {
        return path;
    }

    /** Tensors in header order. */
    public Map<String, TensorInfo> tensors() {
        return tensors;
    }

    /** The header's {@code __metadata__} entries (empty if none). */
    public Map<String, String> metadata() {
        return metadata;
    }

    /** The header entry for {@code name}; fails naming the file if there is none. */
    public TensorInfo info(String name) {
        TensorInfo info = tensors.get(name);
        if (info == null) {
            throw fail(path, "no tensor named '" + name + "'");
        }
        return info;
    }

    /** The tensor's bytes as stored (a read-only view into the mapping, valid until {@link #close()}). */
    public MemorySegment raw(String name) {
        TensorInfo info = info(name);
        return data.asSlice(info.begin(), info.byteSize()).asReadOnly();
    }

    /**
     * Writes tensor {@code name} converted to FP32 (F64 rounded, F16 and BF16 widened exactly) into
     * {@code destination}, which must hold exactly {@code elementCount * 4} bytes.
     */
    public void readFp32(String name, MemorySegment destination) {
        TensorInfo info = info(name);
        long n = info.elementCount();
        if (destination.byteSize() != n * 4) {
            throw new IllegalArgumentException("tensor '" + name + "' has " + n + " elements, destination holds "
                    + destination.byteSize() + " bytes");
        }
        MemorySegment source = data.asSlice(info.begin(), info.byteSize());
        switch (info.dtype()) {
            case F32 -> MemorySegment.copy(source, 0, destination, 0, n * 4);
            case F64 -> {
                for (long i = 0; i < n; i++) {
                    destination.setAtIndex(F32, i, (float) source.getAtIndex(F64, i));
                }
            }
            case F16 -> {
                for (long i = 0; i < n; i++) {
                    destination.setAtIndex(F32, i, Float.float16ToFloat(source.getAtIndex(I16, i)));
                }
            }
            case BF16 -> {
                for (long i = 0; i < n; i++) {
                    destination.setAtIndex(F32, i, Float.intBitsToFloat((source.getAtIndex(I16, i) & 0xFFFF) << 16));
                }
            }
            default -> throw fail(path, "tensor '" + name + "' is " + info.dtype()
                    + ", expected a floating-point type (F32, F16, BF16, F64)");
        }
    }

    /** Tensor {@code name} as a float array (converted like {@link #readFp32}). */
    public float[] readFloats(String name) {
        TensorInfo info = info(name);
        float[] out = new float[Math.toIntExact(info.elementCount())];
        readFp32(name, MemorySegment.ofArray(out));
        return out;
    }

    /** Tensor {@code name} of an integer type (I64, I32, I16, I8, U8, BOOL) widened to long. */
    public long[] readLongs(String name) {
        TensorInfo info = info(name);
        int n = Math.toIntExact(info.elementCount());
        MemorySegment source = data.asSlice(info.begin(), info.byteSize());
        long[] out = new long[n];
        for (int i = 0; i < n; i++) {
            out[i] = switch (info.dtype()) {
                case I64 -> source.getAtIndex(I64, i);
                case I32 -> source.getAtIndex(I32, i);
                case I16 -> source.getAtIndex(I16, i);
                case I8 -> source.get(ValueLayout.JAVA_BYTE, i);
                case U8, BOOL -> source.get(ValueLayout.JAVA_BYTE, i) & 0xFF;
                default -> throw fail(path, "tensor '" + name + "' is " + info.dtype() + ", expected an integer type");
            };
        }
        return out;
    }

    /** Unmaps the file; views returned by {@link #raw} become invalid. */
    @Override
    public void close() {
        arena.close();
    }
}
