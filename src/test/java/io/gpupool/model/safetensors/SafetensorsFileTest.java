package io.gpupool.model.safetensors;

import io.gpupool.model.testing.SafetensorsBuilder;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class SafetensorsFileTest {

    @TempDir
    Path dir;

    @Test
    void readsShapesMetadataAndValues() throws IOException {
        Path file = new SafetensorsBuilder().f32("a", new long[]{2, 3}, 1, 2, 3, 4, 5, 6)
                .f32("b", new long[]{1}, 7).write(dir.resolve("ok.safetensors"));
        try (SafetensorsFile st = SafetensorsFile.open(file)) {
            assertThat(st.tensors()).containsOnlyKeys("a", "b");
            assertThat(st.info("a").shape()).containsExactly(2, 3);
            assertThat(st.metadata()).containsEntry("format", "pt");
            assertThat(st.readFloats("a")).containsExactly(1, 2, 3, 4, 5, 6);
            assertThat(st.readFloats("b")).containsExactly(7);
        }
    }

    @Test
    void widensHalfAndBfloat16ToFp32() throws IOException {
        float[] values = {0f, 1f, -2.5f, 65504f, 6.1035156e-5f, 0.333251953125f};
        ByteBuffer half = ByteBuffer.allocate(values.length * 2).order(ByteOrder.LITTLE_ENDIAN);
        ByteBuffer brain = ByteBuffer.allocate(values.length * 2).order(ByteOrder.LITTLE_ENDIAN);
        for (float v : values) {
            half.putShort(Float.floatToFloat16(v));
            brain.putShort((short) (Float.floatToIntBits(v) >>> 16));
        }
        Path file = new SafetensorsBuilder().raw("h", "F16", new long[]{6}, half.array())
                .raw("b", "BF16", new long[]{6}, brain.array()).write(dir.resolve("half.safetensors"));
        try (SafetensorsFile st = SafetensorsFile.open(file)) {
            assertThat(st.readFloats("h")).containsExactly(values);
            float[] expectedBf16 = new float[values.length];
            for (int i = 0; i < values.length; i++) {
                expectedBf16[i] = Float.intBitsToFloat(Float.floatToIntBits(values[i]) & 0xFFFF0000);
            }
            assertThat(st.readFloats("b")).containsExactly(expectedBf16);
        }
    }

    @Test
    void truncatedDataIsReportedWithTheTensorName() throws IOException {
        byte[] good = new SafetensorsBuilder().f32("a", new long[]{4}).f32("b", new long[]{16}).bytes();
        Path file = Files.write(dir.resolve("cut.safetensors"), Arrays.copyOf(good, good.length - 10));

        assertThatThrownBy(() -> SafetensorsFile.open(file)).isInstanceOf(SafetensorsFormatException.class)
                .hasMessageContaining("cut.safetensors").hasMessageContaining("'b'").hasMessageContaining("truncated");
    }

    @Test
    void truncatedHeaderIsReported() throws IOException {
        byte[] good = new SafetensorsBuilder().f32("a", new long[]{4}).bytes();
        Path inHeader = Files.write(dir.resolve("h.safetensors"), Arrays.copyOf(good, 20));
        Path inLength = Files.write(dir.resolve("l.safetensors"), Arrays.copyOf(good, 5));
        Path empty = Files.write(dir.resolve("e.safetensors"), new byte[0]);

        assertThatThrownBy(() -> SafetensorsFile.open(inHeader)).hasMessageContaining("truncated: the header announces");
        assertThatThrownBy(() -> SafetensorsFile.open(inLength)).hasMessageContaining("truncated: the file has 5 bytes");
        assertThatThrownBy(() -> SafetensorsFile.open(empty)).hasMessageContaining("truncated: the file has 0 bytes");
    }

    @Test
    void headerWhoseOffsetsDisagreeWithTheShapeIsRejected() throws IOException {
        Path file = new SafetensorsBuilder().f32("a", new long[]{4}).f32("b", new long[]{4})
                .lieAboutOffsets("b", 16, 28).write(dir.resolve("size.safetensors"));

        assertThatThrownBy(() -> SafetensorsFile.open(file)).isInstanceOf(SafetensorsFormatException.class)
                .hasMessageContaining("tensor 'b': F32[4] needs 16 bytes but data_offsets [16, 28] span 12");
    }

    @Test
    void overlappingTensorsAreRejected() throws IOException {
        Path file = new SafetensorsBuilder().f32("a", new long[]{4}).f32("b", new long[]{4})
                .lieAboutOffsets("b", 8, 24).write(dir.resolve("overlap.safetensors"));

        assertThatThrownBy(() -> SafetensorsFile.open(file))
                .hasMessageContaining("tensors 'a' [0, 16) and 'b' [8, 24) overlap");
    }

    @Test
    void offsetsPastTheEndAreRejected() throws IOException {
        Path file = new SafetensorsBuilder().f32("a", new long[]{4}).lieAboutOffsets("a", 1000, 1016)
                .write(dir.resolve("past.safetensors"));

        assertThatThrownBy(() -> SafetensorsFile.open(file))
                .hasMessageContaining("tensor 'a': data_offsets [1000, 1016] end past the data region of 16 bytes");
    }

    @Test
    void unknownDtypeAndBadJsonAreRejected() throws IOException {
        Path dtype = new SafetensorsBuilder().raw("a", "F8_E9", new long[]{1}, new byte[1]).write(dir.resolve("d.safetensors"));
        byte[] json = "{not json".getBytes(StandardCharsets.UTF_8);
        ByteBuffer bad = ByteBuffer.allocate(8 + json.length).order(ByteOrder.LITTLE_ENDIAN).putLong(json.length).put(json);
        Path garbage = Files.write(dir.resolve("j.safetensors"), bad.array());

        assertThatThrownBy(() -> SafetensorsFile.open(dtype)).hasMessageContaining("tensor 'a': dtype \"F8_E9\" is not one of");
        assertThatThrownBy(() -> SafetensorsFile.open(garbage)).hasMessageContaining("header is not valid JSON");
        byte[] twice = ("{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]}, "
                + "\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [4, 8]}}").getBytes(StandardCharsets.UTF_8);
        ByteBuffer both = ByteBuffer.allocate(8 + twice.length + 8).order(ByteOrder.LITTLE_ENDIAN).putLong(twice.length)
                .put(twice);
        Path duplicate = Files.write(dir.resolve("t.safetensors"), both.array());
        assertThatThrownBy(() -> SafetensorsFile.open(duplicate)).hasMessageContaining("header is not valid JSON")
                .hasMessageContaining("Duplicate Object property \"a\"");
    }

    @Test
    void integerTensorsAreNotConvertedToFloat() throws IOException {
        Path file = new SafetensorsBuilder().raw("ids", "I64", new long[]{1}, new byte[8]).write(dir.resolve("i.safetensors"));
        try (SafetensorsFile st = SafetensorsFile.open(file)) {
            assertThat(st.readLongs("ids")).containsExactly(0);
            assertThatThrownBy(() -> st.readFloats("ids")).hasMessageContaining("tensor 'ids' is I64, expected a floating-point type");
        }
    }
}
