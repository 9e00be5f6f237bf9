package io.gpupool.model;

import io.gpupool.model.repository.ModelRepository;
import io.gpupool.kernels.host.HostTensorOps;
import io.gpupool.model.safetensors.SafetensorsFile;
import io.gpupool.model.testing.SafetensorsBuilder;
import io.gpupool.model.testing.TestStream;
import io.gpupool.model.testing.TrackingAllocator;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Set;
import java.util.function.IntUnaryOperator;

import static io.gpupool.model.testing.Fixtures.fixture;
import static io.gpupool.model.testing.Fixtures.floats;
import static io.gpupool.model.testing.Fixtures.int64;
import static io.gpupool.model.testing.Fixtures.maxAbsDiff;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * A checkpoint saved in F16 or BF16 runs exactly like the F32 checkpoint holding the same (rounded)
 * values: the widening at load is exact, so the outputs are bit-identical.
 */
class HalfPrecisionWeightsTest {

    @TempDir
    Path root;

    final TestStream stream = new TestStream(0);
    final TrackingAllocator allocator = new TrackingAllocator();
    final LoadTarget target = new LoadTarget(stream, allocator, new HostTensorOps());

    @AfterEach
    void tearDown() {
        stream.close();
        allocator.close();
    }

    /** Writes tiny-bert twice: weights in {@code dtype}, and the same rounded values in F32. */
    private void writeRounded(String dtype, IntUnaryOperator roundBits, java.util.function.IntFunction<Short> encode)
            throws IOException {
        SafetensorsBuilder half = new SafetensorsBuilder();
        SafetensorsBuilder full = new SafetensorsBuilder();
        try (SafetensorsFile source = SafetensorsFile.open(fixture("tiny-bert").resolve("model.safetensors"))) {
            for (var entry : source.tensors().entrySet()) {
                float[] values = source.readFloats(entry.getKey());
                ByteBuffer bytes = ByteBuffer.allocate(values.length * 2).order(ByteOrder.LITTLE_ENDIAN);
                float[] rounded = new float[values.length];
                for (int i = 0; i < values.length; i++) {
                    int bits = Float.floatToIntBits(values[i]);
                    bytes.putShort(encode.apply(bits));
                    rounded[i] = Float.intBitsToFloat(roundBits.applyAsInt(bits));
                }
                half.raw(entry.getKey(), dtype, entry.getValue().shape(), bytes.array());
                full.f32(entry.getKey(), entry.getValue().shape(), rounded);
            }
        }
        for (String name : List.of("half", "full")) {
            Path folder = Files.createDirectories(root.resolve(name));
            Files.copy(fixture("tiny-bert").resolve("config.json"), folder.resolve("config.json"));
            (name.equals("half") ? half : full).write(folder.resolve("model.safetensors"));
        }
    }

    private float[] lastHiddenState(String name) {
        try (InferenceModel model = ModelRepository.loadModel(name, root.resolve(name), target);
             SafetensorsFile ref = SafetensorsFile.open(fixture("tiny-bert").resolve("reference.safetensors"))) {
            List<HostTensor> inputs = List.of(int64(ref, "input_ids", "input_ids"),
                    int64(ref, "attention_mask", "attention_mask"), int64(ref, "token_type_ids", "token_type_ids"));
            return floats(model.infer(inputs, Set.of("last_hidden_state"), new ExecutionContext(stream, allocator,
                    target.ops())).getFirst());
        }
    }

    @Test
    void f16CheckpointRunsLikeItsF32Twin() throws IOException {
        writeRounded("F16", bits -> Float.floatToIntBits(Float.float16ToFloat(Float.floatToFloat16(Float.intBitsToFloat(bits)))),
                bits -> Float.floatToFloat16(Float.intBitsToFloat(bits)));
        float[] half = lastHiddenState("half");
        assertThat(half).containsExactly(lastHiddenState("full"));
        try (SafetensorsFile ref = SafetensorsFile.open(fixture("tiny-bert").resolve("reference.safetensors"))) {
            // and stays near the FP32 reference: F16 keeps ~11 bits
            assertThat(maxAbsDiff(ref.readFloats("last_hidden_state"), half)).isLessThan(2e-2);
        }
    }

    @Test
    void bf16CheckpointRunsLikeItsF32Twin() throws IOException {
        writeRounded("BF16", bits -> bits & 0xFFFF0000, bits -> (short) (bits >>> 16));
        assertThat(lastHiddenState("half")).containsExactly(lastHiddenState("full"));
    }
}
