package io.gpupool.model.testing;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.stream.Collectors;

/**
 * Writes safetensors files for tests, honest ones and ones whose header lies: each entry's
 * offsets default to its true place in the data region but can be overridden.
 */
public final class SafetensorsBuilder {

    private record Entry(String name, String dtype, long[] shape, byte[] bytes, long[] offsets) {
    }

    private final List<Entry> entries = new ArrayList<>();

    /** An F32 tensor of {@code shape} filled with {@code values} (repeated as needed). */
    public SafetensorsBuilder f32(String name, long[] shape, float... values) {
        int n = (int) Arrays.stream(shape).reduce(1, (a, b) -> a * b);
        ByteBuffer buffer = ByteBuffer.allocate(n * 4).order(ByteOrder.LITTLE_ENDIAN);
        for (int i = 0; i < n; i++) {
            buffer.putFloat(values.length == 0 ? i * 0.01f : values[i % values.length]);
        }
        return raw(name, "F32", shape, buffer.array());
    }

    public SafetensorsBuilder raw(String name, String dtype, long[] shape, byte[] bytes) {
        entries.add(new Entry(name, dtype, shape.clone(), bytes, null));
        return this;
    }

    /** Replaces the offsets the header will announce for {@code name} (the bytes stay where they are). */
    public SafetensorsBuilder lieAboutOffsets(String name, long begin, long end) {
        for (int i = 0; i < entries.size(); i++) {
            Entry e = entries.get(i);
            if (e.name().equals(name)) {
                entries.set(i, new Entry(e.name(), e.dtype(), e.shape(), e.bytes(), new long[]{begin, end}));
            }
        }
        return this;
    }

    /** Every entry of the file: name -> shape, as F32, values ramping from 0. */
    public static SafetensorsBuilder allF32(Map<String, long[]> shapes) {
        SafetensorsBuilder builder = new SafetensorsBuilder();
        shapes.forEach((name, shape) -> builder.f32(name, shape));
        return builder;
    }

    public byte[] bytes() {
        ByteArrayOutputStream data = new ByteArrayOutputStream();
        List<String> headerEntries = new ArrayList<>();
        for (Entry e : entries) {
            long begin = data.size();
            data.writeBytes(e.bytes());
            long end = data.size();
            long[] offsets = e.offsets() != null ? e.offsets() : new long[]{begin, end};
            headerEntries.add("\"" + e.name() + "\":{\"dtype\":\"" + e.dtype() + "\",\"shape\":"
                    + Arrays.stream(e.shape()).mapToObj(Long::toString).collect(Collectors.joining(",", "[", "]"))
                    + ",\"data_offsets\":[" + offsets[0] + "," + offsets[1] + "]}");
        }
        byte[] header = ("{\"__metadata__\":{\"format\":\"pt\"}" + (headerEntries.isEmpty() ? "" : ",")
                + String.join(",", headerEntries) + "}").getBytes(StandardCharsets.UTF_8);
        ByteBuffer out = ByteBuffer.allocate(8 + header.length + data.size()).order(ByteOrder.LITTLE_ENDIAN);
        out.putLong(header.length).put(header).put(data.toByteArray());
        return out.array();
    }

    public Path write(Path path) throws IOException {
        Files.write(path, bytes());
        return path;
    }
}
