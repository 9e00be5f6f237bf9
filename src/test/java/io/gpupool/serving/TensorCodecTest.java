package io.gpupool.serving;

import io.gpupool.model.DataType;
import org.junit.jupiter.api.Test;
import tools.jackson.databind.JsonNode;

import java.lang.foreign.MemorySegment;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/** JSON tensor data in and out: nesting, rounding, ranges. */
class TensorCodecTest {

    private static JsonNode json(String text) {
        return ServingFixture.JSON.readTree(text);
    }

    @Test
    void nestedAndFlatGiveTheSameRowMajorBytes() {
        byte[] nested = TensorCodec.fromJson("x", DataType.INT32, new long[]{3, 2}, json("[[1, 2], [3, 4], [5, 6]]"));
        byte[] flat = TensorCodec.fromJson("x", DataType.INT32, new long[]{3, 2}, json("[1, 2, 3, 4, 5, 6]"));
        assertThat(nested).isEqualTo(flat);
        assertThat(MemorySegment.ofArray(flat).getAtIndex(TensorCodec.INT, 5)).isEqualTo(6);
    }

    @Test
    void raggedDataIsRefusedEvenWhenItsElementCountFits() {
        assertThatThrownBy(() -> TensorCodec.fromJson("x", DataType.INT32, new long[]{2, 3}, json("[[1, 2], [3, 4, 5, 6]]")))
                .isInstanceOf(ServingException.class)
                .hasMessageStartingWith("input 'x': 'data' does not match shape [2, 3]");
        assertThatThrownBy(() -> TensorCodec.fromJson("x", DataType.INT32, new long[]{2, 2}, json("[[1, 2], 3, 4]")))
                .hasMessageStartingWith("input 'x': 'data' does not match shape [2, 2]");
    }

    @Test
    void bytesDataFollowsTheShapesNestingAsNumbersDo() {
        byte[] nested = TensorCodec.fromJson("t", DataType.BYTES, new long[]{2, 1}, json("[[\"a\"], [\"b\"]]"));
        assertThat(nested).isEqualTo(TensorCodec.fromJson("t", DataType.BYTES, new long[]{2, 1}, json("[\"a\", \"b\"]")));
        assertThatThrownBy(() -> TensorCodec.fromJson("t", DataType.BYTES, new long[]{2}, json("[[\"a\"], [\"b\"]]")))
                .isInstanceOf(ServingException.class)
                .hasMessageStartingWith("input 't': 'data' does not match shape [2]");
        assertThatThrownBy(() -> TensorCodec.fromJson("t", DataType.BYTES, new long[]{1, 2}, json("[[[\"a\", \"b\"]]]")))
                .hasMessageStartingWith("input 't': 'data' does not match shape [1, 2]");
        assertThatThrownBy(() -> TensorCodec.fromJson("t", DataType.BYTES, new long[]{2}, json("[\"a\", 3]")))
                .hasMessageContaining("element 1");
    }

    @Test
    void nonFiniteBinaryFloatsAreRefusedAndFoundInOutputs() {
        byte[] half = {0x00, 0x3C, 0x00, 0x7C}; // 1.0, +Infinity in FP16
        assertThatThrownBy(() -> TensorCodec.requireFinite("h", DataType.FP16, half))
                .hasMessage("input 'h': element 1 (Infinity) is not a valid FP16 value (non-finite numbers are refused)");
        assertThat(TensorCodec.firstNonFinite(DataType.FP16, MemorySegment.ofArray(half))).isEqualTo(1);
        assertThat(TensorCodec.firstNonFinite(DataType.FP32, MemorySegment.ofArray(new float[]{1, 2}))).isEqualTo(-1);
        assertThat(TensorCodec.firstNonFinite(DataType.INT32, MemorySegment.ofArray(new int[]{0x7F800000}))).isEqualTo(-1);
    }

    @Test
    void deeplyNestedDataIsWalkedWithoutRecursion() {
        String deep = "[".repeat(450) + "7" + "]".repeat(450); // the JSON parser itself stops at 500 levels
        long[] shape = new long[450];
        java.util.Arrays.fill(shape, 1);
        byte[] bytes = TensorCodec.fromJson("x", DataType.INT64, shape, json(deep));
        assertThat(MemorySegment.ofArray(bytes).get(TensorCodec.LONG, 0)).isEqualTo(7L);
    }

    @Test
    void bfloat16RoundsToNearestEven() {
        assertThat(TensorCodec.fromBfloat16(TensorCodec.toBfloat16(1.00390625f))).isEqualTo(1.0f);
        assertThat(TensorCodec.fromBfloat16(TensorCodec.toBfloat16(1.01171875f))).isEqualTo(1.015625f);
        assertThat(TensorCodec.fromBfloat16(TensorCodec.toBfloat16(Math.nextUp(1.00390625f)))).isEqualTo(1.0078125f);
        assertThat(TensorCodec.fromBfloat16(TensorCodec.toBfloat16(Float.NaN))).isNaN();
        assertThat(TensorCodec.fromBfloat16(TensorCodec.toBfloat16(Float.NEGATIVE_INFINITY)))
                .isEqualTo(Float.NEGATIVE_INFINITY);
    }

    @Test
    void valuesOutsideTheTypeAreRejectedNamingInputAndElement() {
        assertThatThrownBy(() -> TensorCodec.fromJson("ids", DataType.INT32, new long[]{2}, json("[1, 2147483648]")))
                .isInstanceOf(ServingException.class)
                .hasMessage("input 'ids': element 1 (2147483648) is not a valid INT32 value");
        assertThatThrownBy(() -> TensorCodec.fromJson("flags", DataType.BOOL, new long[]{1}, json("[\"yes\"]")))
                .hasMessage("input 'flags': element 0 (\"yes\") is not a valid BOOL value");
        assertThatThrownBy(() -> TensorCodec.fromJson("x", DataType.FP32, new long[]{3}, json("[1, 2, 3, 4]")))
                .hasMessage("input 'x': shape needs 3 elements but 'data' holds more");
        assertThatThrownBy(() -> TensorCodec.fromJson("x", DataType.FP32, new long[]{2}, json("{\"a\": 1}")))
                .hasMessageContaining("'data' must be a JSON array");
    }

    @Test
    void numbersBeyondTheFloatRangeAreRejectedNotTurnedIntoInfinity() {
        assertThatThrownBy(() -> TensorCodec.fromJson("x", DataType.FP32, new long[]{2}, json("[1e999, 2]")))
                .isInstanceOf(ServingException.class)
                .hasMessageStartingWith("input 'x': element 0 (a number beyond any double's range)")
                .hasMessageNotContaining("Infinity");
        assertThatThrownBy(() -> TensorCodec.fromJson("x", DataType.FP32, new long[]{1}, json("[1e39]")))
                .hasMessageEndingWith("is not a valid FP32 value");
        assertThatThrownBy(() -> TensorCodec.fromJson("x", DataType.FP64, new long[]{1}, json("[-1e999]")))
                .hasMessageEndingWith("is not a valid FP64 value");
    }

    @Test
    void integersTooLongForALongAreReadAsNumbersOrRefusedNamingTheElement() {
        String e141 = "1" + "0".repeat(141);
        String e400 = "1" + "0".repeat(400);
        assertThatThrownBy(() -> TensorCodec.fromJson("x", DataType.FP32, new long[]{2}, json("[1, " + e141 + "]")))
                .isInstanceOf(ServingException.class)
                .hasMessageStartingWith("input 'x': element 1 (").hasMessageEndingWith("is not a valid FP32 value");
        byte[] fp64 = TensorCodec.fromJson("x", DataType.FP64, new long[]{1}, json("[" + e141 + "]"));
        assertThat(java.nio.ByteBuffer.wrap(fp64).order(java.nio.ByteOrder.LITTLE_ENDIAN).getDouble()).isEqualTo(1e141);
        assertThatThrownBy(() -> TensorCodec.fromJson("x", DataType.FP64, new long[]{1}, json("[-" + e400 + "]")))
                .isInstanceOf(ServingException.class).hasMessageEndingWith("is not a valid FP64 value");
        assertThatThrownBy(() -> TensorCodec.fromJson("x", DataType.BF16, new long[]{1}, json("[" + e400 + "]")))
                .isInstanceOf(ServingException.class).hasMessageEndingWith("is not a valid BF16 value");
        assertThatThrownBy(() -> TensorCodec.fromJson("flags", DataType.BOOL, new long[]{1}, json("[18446744073709551617]")))
                .isInstanceOf(ServingException.class).hasMessageEndingWith("is not a valid BOOL value");
        assertThatThrownBy(() -> TensorCodec.fromJson("ids", DataType.INT64, new long[]{1}, json("[9223372036854775808]")))
                .isInstanceOf(ServingException.class).hasMessageEndingWith("is not a valid INT64 value");
    }

    @Test
    void floatOutputsInJsonReadBackToExactlyTheValuesComputedInsideTheObjectTheyBelongTo() {
        float[] values = {0f, -0f, 1f, -1.5f, 0.1f, 1e-7f, -65504f, 1.4e-45f, 12345.678f, Math.nextUp(1f)};
        for (DataType type : java.util.List.of(DataType.FP32, DataType.FP16, DataType.BF16)) {
            MemorySegment data = MemorySegment.ofArray(new byte[values.length * type.byteSize()]);
            float[] stored = new float[values.length];
            for (int i = 0; i < values.length; i++) {
                long offset = (long) i * type.byteSize();
                switch (type) {
                    case FP16 -> data.set(TensorCodec.SHORT, offset, Float.floatToFloat16(values[i]));
                    case BF16 -> data.set(TensorCodec.SHORT, offset, TensorCodec.toBfloat16(values[i]));
                    default -> data.set(TensorCodec.FLOAT, offset, values[i]);
                }
                stored[i] = switch (type) {
                    case FP16 -> Float.float16ToFloat(data.get(TensorCodec.SHORT, offset));
                    case BF16 -> TensorCodec.fromBfloat16(data.get(TensorCodec.SHORT, offset));
                    default -> values[i];
                };
            }
            java.io.ByteArrayOutputStream out = new java.io.ByteArrayOutputStream();
            try (tools.jackson.core.JsonGenerator generator = ServingFixture.JSON.createGenerator(out)) {
                generator.writeStartObject();
                generator.writeName("data");
                TensorCodec.writeJson(generator, out, type, data);
                generator.writeStringProperty("after", "x");
                generator.writeEndObject();
            }
            JsonNode read = json(out.toString(java.nio.charset.StandardCharsets.UTF_8));
            assertThat(read.path("after").asString()).as("%s: the object goes on after the array", type).isEqualTo("x");
            assertThat(read.path("data").size()).isEqualTo(values.length);
            for (int i = 0; i < values.length; i++) {
                assertThat(Float.parseFloat(read.path("data").get(i).asString()))
                        .as("%s element %d", type, i).isEqualTo(stored[i]);
            }
        }
    }

    @Test
    void aLargeFloatOutputIsWholeAndExactInJson() {
        float[] values = new float[5000];
        java.util.Random random = new java.util.Random(3);
        for (int i = 0; i < values.length; i++) {
            values[i] = (float) (random.nextGaussian() * Math.pow(10, random.nextInt(13) - 6));
        }
        java.io.ByteArrayOutputStream out = new java.io.ByteArrayOutputStream();
        try (tools.jackson.core.JsonGenerator generator = ServingFixture.JSON.createGenerator(out)) {
            TensorCodec.writeJson(generator, out, DataType.FP32, MemorySegment.ofArray(values));
        }
        JsonNode read = json(out.toString(java.nio.charset.StandardCharsets.UTF_8));
        assertThat(read.size()).isEqualTo(values.length);
        for (int i = 0; i < values.length; i++) {
            assertThat(Float.parseFloat(read.get(i).asString())).as("element %d", i).isEqualTo(values[i]);
        }
    }

    @Test
    void floatArraysReadExactlyAsTheGeneratorWritesEachNumber() {
        float[] values = {0f, -0f, 1f, -1.5f, 1e-7f, 3.4028235e38f, Float.MIN_VALUE, 0.001f, 1e7f, 123456.79f,
                -0.0012817383f, 0.59375f, 1.0E-5f};
        java.io.ByteArrayOutputStream ours = new java.io.ByteArrayOutputStream();
        try (tools.jackson.core.JsonGenerator generator = ServingFixture.JSON.createGenerator(ours)) {
            generator.writeStartObject();
            generator.writeName("data");
            TensorCodec.writeJson(generator, ours, DataType.FP32, MemorySegment.ofArray(values));
            generator.writeEndObject();
        }
        java.io.ByteArrayOutputStream theirs = new java.io.ByteArrayOutputStream();
        try (tools.jackson.core.JsonGenerator generator = ServingFixture.JSON.createGenerator(theirs)) {
            generator.writeStartObject();
            generator.writeName("data");
            generator.writeStartArray();
            for (float value : values) {
                generator.writeNumber(value);
            }
            generator.writeEndArray();
            generator.writeEndObject();
        }
        assertThat(ours.toString(java.nio.charset.StandardCharsets.UTF_8))
                .isEqualTo(theirs.toString(java.nio.charset.StandardCharsets.UTF_8));
    }
}
