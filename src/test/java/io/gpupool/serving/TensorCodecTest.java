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
        byte[] nested = TensorCodec.fromJson("x", DataType.INT32, 6, json("[[[1, 2], [3, 4]], [[5, 6]]]"));
        byte[] flat = TensorCodec.fromJson("x", DataType.INT32, 6, json("[1, 2, 3, 4, 5, 6]"));
        assertThat(nested).isEqualTo(flat);
        assertThat(MemorySegment.ofArray(flat).getAtIndex(TensorCodec.INT, 5)).isEqualTo(6);
    }

    @Test
    void deeplyNestedDataIsWalkedWithoutRecursion() {
        String deep = "[".repeat(450) + "7" + "]".repeat(450); // the JSON parser itself stops at 500 levels
        byte[] bytes = TensorCodec.fromJson("x", DataType.INT64, 1, json(deep));
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
        assertThatThrownBy(() -> TensorCodec.fromJson("ids", DataType.INT32, 2, json("[1, 2147483648]")))
                .isInstanceOf(ServingException.class)
                .hasMessage("input 'ids': element 1 (2147483648) is not a valid INT32 value");
        assertThatThrownBy(() -> TensorCodec.fromJson("flags", DataType.BOOL, 1, json("[\"yes\"]")))
                .hasMessage("input 'flags': element 0 (\"yes\") is not a valid BOOL value");
        assertThatThrownBy(() -> TensorCodec.fromJson("x", DataType.FP32, 3, json("[1, 2, 3, 4]")))
                .hasMessage("input 'x': shape needs 3 elements but 'data' holds more");
        assertThatThrownBy(() -> TensorCodec.fromJson("x", DataType.FP32, 2, json("{\"a\": 1}")))
                .hasMessageContaining("'data' must be a JSON array");
    }

    @Test
    void numbersBeyondTheFloatRangeAreRejectedNotTurnedIntoInfinity() {
        assertThatThrownBy(() -> TensorCodec.fromJson("x", DataType.FP32, 2, json("[1e999, 2]")))
                .isInstanceOf(ServingException.class)
                .hasMessageStartingWith("input 'x': element 0 (");
        assertThatThrownBy(() -> TensorCodec.fromJson("x", DataType.FP32, 1, json("[1e39]")))
                .hasMessageEndingWith("is not a valid FP32 value");
        assertThatThrownBy(() -> TensorCodec.fromJson("x", DataType.FP64, 1, json("[-1e999]")))
                .hasMessageEndingWith("is not a valid FP64 value");
    }
}
