package io.gpupool.serving;

import io.gpupool.model.BytesElements;
import io.gpupool.model.DataType;
import io.gpupool.model.HostTensor;
import org.junit.jupiter.api.Test;

import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class ClassificationTest {

    private static HostTensor floats(long[] shape, float... values) {
        ByteBuffer b = ByteBuffer.allocate(values.length * 4).order(ByteOrder.LITTLE_ENDIAN);
        for (float v : values) {
            b.putFloat(v);
        }
        return new HostTensor("scores", DataType.FP32, shape, MemorySegment.ofArray(b.array()));
    }

    private static List<String> texts(HostTensor tensor) {
        return BytesElements.decode(tensor.data()).stream().map(e -> new String(e, StandardCharsets.UTF_8)).toList();
    }

    @Test
    void eachRowOfABatchIsRankedOnItsOwnWithLabelsWhereTheyNameEveryClass() {
        HostTensor result = Classification.topK(floats(new long[]{2, 3}, 0.2f, 0.7f, 0.1f, 0.6f, 0.3f, 0.1f), 2, true,
                List.of("cat", "dog", "fox"));
        assertThat(result.dataType()).isEqualTo(DataType.BYTES);
        assertThat(result.shape()).containsExactly(2, 2);
        assertThat(texts(result)).containsExactly("0.7:1:dog", "0.2:0:cat", "0.6:0:cat", "0.3:1:dog");
    }

    @Test
    void labelsThatDoNotNameEveryIndexAreLeftOut() {
        assertThat(texts(Classification.topK(floats(new long[]{1, 3}, 1, 3, 2), 1, true, List.of("a", "b"))))
                .containsExactly("3.0:1");
    }

    @Test
    void equalValuesKeepIndexOrderAndAModelThatDoesNotBatchIsOneRowOfAllItsValues() {
        HostTensor result = Classification.topK(floats(new long[]{2, 2}, 5, 1, 5, 5), 3, false, List.of());
        assertThat(result.shape()).containsExactly(3);
        assertThat(texts(result)).containsExactly("5.0:0", "5.0:2", "5.0:3");
    }

    @Test
    void integersAreRankedExactlyAndWrittenAsIntegers() {
        ByteBuffer b = ByteBuffer.allocate(24).order(ByteOrder.LITTLE_ENDIAN);
        b.putLong(Long.MAX_VALUE - 1).putLong(-3).putLong(Long.MAX_VALUE);
        HostTensor ints = new HostTensor("counts", DataType.INT64, new long[]{1, 3}, MemorySegment.ofArray(b.array()));
        assertThat(texts(Classification.topK(ints, 2, true, List.of())))
                .containsExactly(Long.MAX_VALUE + ":2", (Long.MAX_VALUE - 1) + ":0");
    }

    @Test
    void halfPrecisionValuesAreWrittenAsTheFloatsTheyHold() {
        ByteBuffer b = ByteBuffer.allocate(4).order(ByteOrder.LITTLE_ENDIAN);
        b.putShort(Float.floatToFloat16(0.25f)).putShort(Float.floatToFloat16(-2f));
        HostTensor half = new HostTensor("h", DataType.FP16, new long[]{2}, MemorySegment.ofArray(b.array()));
        assertThat(texts(Classification.topK(half, 2, false, List.of()))).containsExactly("0.25:0", "-2.0:1");
    }

    @Test
    void anEmptyBatchGivesAnEmptyResultAndBytesAreRefused() {
        assertThat(Classification.topK(floats(new long[]{0, 3}), 2, true, List.of()).shape()).containsExactly(0, 0);
        HostTensor text = new HostTensor("t", DataType.BYTES, new long[]{1},
                MemorySegment.ofArray(BytesElements.encode(List.of("x".getBytes(StandardCharsets.UTF_8)))));
        assertThatThrownBy(() -> Classification.topK(text, 1, false, List.of()))
                .hasMessageContaining("only numbers are classified");
    }
}
