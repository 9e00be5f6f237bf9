package io.gpupool.model.mlp;

import io.gpupool.kernels.host.HostTensorOps;
import io.gpupool.model.DataType;
import io.gpupool.model.ExecutionContext;
import io.gpupool.model.HostTensor;
import io.gpupool.model.LoadTarget;
import io.gpupool.model.repository.ModelRepository;
import io.gpupool.model.TensorSpec;
import io.gpupool.model.testing.TestStream;
import io.gpupool.model.testing.TrackingAllocator;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Path;
import java.util.List;
import java.util.Set;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/** The shipped Iris model (models/iris-mlp), as the README's curl example uses it. */
class MlpModelTest {

    final TestStream stream = new TestStream(0);
    final TrackingAllocator weights = new TrackingAllocator();
    final TrackingAllocator requests = new TrackingAllocator();
    final HostTensorOps ops = new HostTensorOps();
    final MlpModel model = (MlpModel) ModelRepository.loadModel("iris-mlp", Path.of("models/iris-mlp"),
            new LoadTarget(stream, weights, ops));

    @AfterEach
    void close() {
        model.close();
        stream.close();
        requests.close();
        weights.close();
    }

    private HostTensor input(float... values) {
        MemorySegment data = Arena.ofAuto().allocate(values.length * 4L, 4);
        MemorySegment.copy(values, 0, data, ValueLayout.JAVA_FLOAT, 0, values.length);
        return new HostTensor("input", DataType.FP32, new long[]{values.length / 4, 4}, data);
    }

    @Test
    void theReadmeExampleNamesSetosaAndVirginica() {
        List<HostTensor> out = model.infer(List.of(input(5.1f, 3.5f, 1.4f, 0.2f, 6.7f, 3.0f, 5.2f, 2.3f)), Set.of(),
                new ExecutionContext(stream, requests, ops));

        assertThat(out).extracting(HostTensor::name).containsExactly("probabilities", "label");
        long[] labels = out.get(1).data().toArray(ValueLayout.JAVA_LONG);
        assertThat(labels).containsExactly(0, 2);
        assertThat(model.classLabels().get((int) labels[0])).isEqualTo("setosa");
        assertThat(model.classLabels().get((int) labels[1])).isEqualTo("virginica");
        float[] p = out.get(0).data().toArray(ValueLayout.JAVA_FLOAT);
        assertThat(p[0] + p[1] + p[2]).isCloseTo(1f, org.assertj.core.api.Assertions.within(1e-6f));
        assertThat(requests.outstandingBlocks()).isZero();
    }

    @Test
    void metadataAndValidation() {
        assertThat(model.inputs()).containsExactly(new TensorSpec("input", DataType.FP32, new long[]{-1, 4}));
        assertThat(model.outputs()).containsExactly(new TensorSpec("probabilities", DataType.FP32, new long[]{-1, 3}),
                new TensorSpec("label", DataType.INT64, new long[]{-1}));
        assertThat(model.maxSequenceLength()).isZero();

        HostTensor threeFeatures = new HostTensor("input", DataType.FP32, new long[]{1, 3},
                Arena.ofAuto().allocate(12, 4));
        assertThatThrownBy(() -> model.infer(List.of(threeFeatures), Set.of(), new ExecutionContext(stream, requests, ops)))
                .hasMessageContaining("expected FP32[1..256, 4]");
        assertThatThrownBy(() -> model.infer(List.of(input(1, 2, 3, 4)), Set.of("logits"),
                new ExecutionContext(stream, requests, ops))).hasMessageContaining("has no output 'logits'");
    }
}
