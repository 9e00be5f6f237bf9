package io.gpupool.model;

import io.gpupool.model.repository.ModelRepository;
import io.gpupool.backend.DeviceStream;
import io.gpupool.kernels.TensorOps;
import io.gpupool.memory.DeviceAllocator;
import io.gpupool.model.bert.BertModel;
import io.gpupool.model.mlp.MlpModel;
import io.gpupool.model.safetensors.SafetensorsFile;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

import java.lang.foreign.ValueLayout;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.function.Function;
import java.util.stream.Collectors;

import static io.gpupool.model.testing.Fixtures.fixture;
import static io.gpupool.model.testing.Fixtures.floats;
import static io.gpupool.model.testing.Fixtures.fp32;
import static io.gpupool.model.testing.Fixtures.int64;
import static io.gpupool.model.testing.Fixtures.maxAbsDiff;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * What every backend's kernels must achieve: the committed fixtures' outputs, as transformers and
 * scikit-learn computed them (tools/fixtures/make_fixtures.py), within 1e-4 max abs in FP32.
 * Each backend adds a subclass that says how to get a stream, allocators and its TensorOps.
 */
public abstract class ReferenceOutputsContract {

    static final double TOLERANCE = 1e-4;

    /** What a backend provides to the test; {@code close} tears it down. */
    protected record Backend(DeviceStream stream, DeviceAllocator weights, DeviceAllocator requests, TensorOps ops,
                             AutoCloseable close) {
    }

    protected abstract Backend openBackend() throws Exception;

    protected Backend backend;

    @BeforeEach
    void open() throws Exception {
        backend = openBackend();
    }

    @AfterEach
    void tearDown() throws Exception {
        backend.close().close();
    }

    protected InferenceModel load(String name) {
        return ModelRepository.loadModel(name, fixture(name), new LoadTarget(backend.stream(), backend.weights(), backend.ops()));
    }

    protected ExecutionContext context() {
        return new ExecutionContext(backend.stream(), backend.requests(), backend.ops());
    }

    private static Map<String, HostTensor> byName(List<HostTensor> tensors) {
        return tensors.stream().collect(Collectors.toMap(HostTensor::name, Function.identity()));
    }

    @Test
    void tinyBertMatchesTransformersWithPaddingAndTokenTypes() {
        try (InferenceModel model = load("tiny-bert");
             SafetensorsFile ref = SafetensorsFile.open(fixture("tiny-bert").resolve("reference.safetensors"))) {
            List<HostTensor> inputs = List.of(int64(ref, "input_ids", "input_ids"),
                    int64(ref, "attention_mask", "attention_mask"), int64(ref, "token_type_ids", "token_type_ids"));
            Map<String, HostTensor> out = byName(model.infer(inputs, Set.of(), context()));

            assertThat(out.get("last_hidden_state").shape()).containsExactly(3, 10, 32);
            assertThat(maxAbsDiff(ref.readFloats("last_hidden_state"), floats(out.get("last_hidden_state"))))
                    .isLessThan(TOLERANCE);
            assertThat(maxAbsDiff(ref.readFloats("pooler_output"), floats(out.get("pooler_output"))))
                    .isLessThan(TOLERANCE);
        }
    }

    @Test
    void tinyBertMatchesTransformersWithoutOptionalInputs() {
        try (InferenceModel model = load("tiny-bert");
             SafetensorsFile ref = SafetensorsFile.open(fixture("tiny-bert").resolve("reference.safetensors"))) {
            Map<String, HostTensor> out = byName(model.infer(List.of(int64(ref, "nomask.input_ids", "input_ids")),
                    Set.of("last_hidden_state", "pooler_output"), context()));

            assertThat(maxAbsDiff(ref.readFloats("nomask.last_hidden_state"), floats(out.get("last_hidden_state"))))
                    .isLessThan(TOLERANCE);
            assertThat(maxAbsDiff(ref.readFloats("nomask.pooler_output"), floats(out.get("pooler_output"))))
                    .isLessThan(TOLERANCE);
        }
    }

    @Test
    void sequenceClassifierMatchesTransformersLogitsAndMeanPooling() {
        try (InferenceModel model = load("tiny-bert-cls");
             SafetensorsFile ref = SafetensorsFile.open(fixture("tiny-bert-cls").resolve("reference.safetensors"))) {
            List<HostTensor> inputs = List.of(int64(ref, "input_ids", "input_ids"),
                    int64(ref, "attention_mask", "attention_mask"), int64(ref, "token_type_ids", "token_type_ids"));
            Map<String, HostTensor> out = byName(model.infer(inputs, Set.of("logits", "embedding"), context()));

            assertThat(out).containsOnlyKeys("logits", "embedding");
            assertThat(out.get("logits").shape()).containsExactly(3, 3);
            assertThat(maxAbsDiff(ref.readFloats("logits"), floats(out.get("logits")))).isLessThan(TOLERANCE);
            assertThat(maxAbsDiff(ref.readFloats("mean_embedding"), floats(out.get("embedding")))).isLessThan(TOLERANCE);
        }
    }

    @Test
    void irisMlpMatchesScikitLearn() {
        try (InferenceModel model = load("iris-mlp");
             SafetensorsFile ref = SafetensorsFile.open(fixture("iris-mlp").resolve("reference.safetensors"))) {
            Map<String, HostTensor> out = byName(model.infer(List.of(fp32(ref, "input", MlpModel.INPUT)), Set.of(), context()));

            assertThat(maxAbsDiff(ref.readFloats("probabilities"), floats(out.get("probabilities")))).isLessThan(TOLERANCE);
            long[] predicted = ref.readLongs("predicted");
            long[] labels = out.get("label").data().toArray(ValueLayout.JAVA_LONG);
            assertThat(labels).containsExactly(predicted);
        }
    }

    @Test
    void bertOutputsDoNotDependOnBatchCompanions() {
        // Row 1 alone must give what it gives inside the padded batch (masking and batching are right).
        try (InferenceModel model = load("tiny-bert");
             SafetensorsFile ref = SafetensorsFile.open(fixture("tiny-bert").resolve("reference.safetensors"))) {
            long[] ids = ref.readLongs("input_ids");
            long[] types = ref.readLongs("token_type_ids");
            int seq = 6; // row 1 has 6 real tokens
            long[] rowIds = java.util.Arrays.copyOfRange(ids, 10, 10 + seq);
            long[] rowTypes = java.util.Arrays.copyOfRange(types, 10, 10 + seq);
            List<HostTensor> inputs = List.of(longs("input_ids", rowIds, seq), longs("token_type_ids", rowTypes, seq));
            HostTensor hidden = model.infer(inputs, Set.of("last_hidden_state"), context()).getFirst();
            float[] expected = java.util.Arrays.copyOfRange(ref.readFloats("last_hidden_state"), 10 * 32, (10 + seq) * 32);
            assertThat(maxAbsDiff(expected, floats(hidden))).isLessThan(TOLERANCE);
        }
    }

    static HostTensor longs(String name, long[] values, int seq) {
        var data = java.lang.foreign.Arena.ofAuto().allocate((long) values.length * Long.BYTES, 8);
        java.lang.foreign.MemorySegment.copy(values, 0, data, ValueLayout.JAVA_LONG, 0, values.length);
        return new HostTensor(name, DataType.INT64, new long[]{values.length / seq, seq}, data);
    }
}
