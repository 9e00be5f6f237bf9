package io.gpupool.model.bert;

import io.gpupool.kernels.host.HostTensorOps;
import io.gpupool.memory.OutOfDeviceMemoryException;
import io.gpupool.model.DataType;
import io.gpupool.model.ExecutionContext;
import io.gpupool.model.HostTensor;
import io.gpupool.model.LoadTarget;
import io.gpupool.model.repository.ModelRepository;
import io.gpupool.model.TensorSpec;
import io.gpupool.model.safetensors.SafetensorsFile;
import io.gpupool.model.testing.TestStream;
import io.gpupool.model.testing.TrackingAllocator;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.List;
import java.util.Set;

import static io.gpupool.model.testing.Fixtures.fixture;
import static io.gpupool.model.testing.Fixtures.floats;
import static io.gpupool.model.testing.Fixtures.int64;
import static io.gpupool.model.testing.Fixtures.maxAbsDiff;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class BertModelTest {

    final TestStream stream = new TestStream(0);
    final TrackingAllocator weights = new TrackingAllocator();
    final TrackingAllocator requests = new TrackingAllocator();
    final HostTensorOps ops = new HostTensorOps();
    BertModel model;
    SafetensorsFile reference;
    List<HostTensor> inputs;

    @BeforeEach
    void load() {
        model = (BertModel) ModelRepository.loadModel("tiny-bert", fixture("tiny-bert"), new LoadTarget(stream, weights, ops));
        reference = SafetensorsFile.open(fixture("tiny-bert").resolve("reference.safetensors"));
        inputs = List.of(int64(reference, "input_ids", "input_ids"), int64(reference, "attention_mask", "attention_mask"),
                int64(reference, "token_type_ids", "token_type_ids"));
    }

    @AfterEach
    void close() {
        model.close();
        reference.close();
        assertThat(weights.outstandingBlocks()).as("weights freed on close").isZero();
        stream.close();
        weights.close();
        requests.close();
    }

    ExecutionContext context() {
        return new ExecutionContext(stream, requests, ops);
    }

    @Test
    void metadataDescribesTheServingSection() {
        assertThat(model.inputs()).containsExactly(
                new TensorSpec("input_ids", DataType.INT64, new long[]{-1, -1}),
                new TensorSpec("attention_mask", DataType.INT64, new long[]{-1, -1}),
                new TensorSpec("token_type_ids", DataType.INT64, new long[]{-1, -1}));
        assertThat(model.outputs()).containsExactly(
                new TensorSpec("last_hidden_state", DataType.FP32, new long[]{-1, -1, 32}),
                new TensorSpec("pooler_output", DataType.FP32, new long[]{-1, 32}));
        assertThat(model.maxBatchSize()).isEqualTo(8);
        assertThat(model.maxSequenceLength()).isEqualTo(64);
        assertThat(model.platform()).isEqualTo("gpupool_bert");
    }

    @Test
    void aRequestPeaksAtExactlyThePlannedBytesAndReturnsThemAll() {
        requests.resetPeak();
        model.infer(inputs, Set.of(), context());

        assertThat(requests.peakBytes()).isEqualTo(model.peakActivationBytes(3, 10));
        assertThat(requests.outstandingBlocks()).isZero();
        // Liveness keeps the peak to a few [T, H]-sized tensors: far below holding every intermediate
        // (2 layers x 9 tensors, the largest [T, 3H] and [T, I]).
        long tokenHidden = 3 * 10 * 32 * 4;
        assertThat(model.peakActivationBytes(3, 10)).isLessThan(8 * tokenHidden);
        assertThat(model.largestActivationBytes(3, 10)).isEqualTo(3 * tokenHidden);
    }

    @Test
    void plannedPeakGrowsLinearlyWithTokensForTheHostKernels() {
        // Host attention needs no workspace, so every activation is proportional to batch x seq
        // (up to the 256-byte rounding): doubling the tokens doubles the peak.
        assertThat(model.peakActivationBytes(8, 64)).isEqualTo(2 * model.peakActivationBytes(4, 64));
    }

    @Test
    void aKernelFailureReleasesEverythingAndTheNextRequestWorks() {
        stream.failAtTask(4);
        assertThatThrownBy(() -> model.infer(inputs, Set.of(), context())).hasMessageContaining("injected failure");
        assertThat(requests.outstandingBlocks()).isZero();

        stream.failAtTask(0);
        HostTensor hidden = model.infer(inputs, Set.of("last_hidden_state"), context()).getFirst();
        assertThat(maxAbsDiff(reference.readFloats("last_hidden_state"), floats(hidden))).isLessThan(1e-4);
    }

    @Test
    void anAllocationFailureMidRequestReleasesEverything() {
        requests.failAtAllocation(9);
        assertThatThrownBy(() -> model.infer(inputs, Set.of(), context())).isInstanceOf(OutOfDeviceMemoryException.class);
        assertThat(requests.outstandingBlocks()).isZero();
    }

    @Test
    void badInputsAreRejectedBeforeAnyDeviceMemoryIsTaken() {
        HostTensor outOfVocab = ids(new long[]{1, 2, 100}, 1, 3);
        assertThatThrownBy(() -> model.infer(List.of(outOfVocab), Set.of(), context()))
                .hasMessageContaining("input_ids[0, 2] = 100, expected 0 <= id < vocab_size = 100");
        HostTensor tooLong = ids(new long[65], 1, 65);
        assertThatThrownBy(() -> model.infer(List.of(tooLong), Set.of(), context()))
                .hasMessageContaining("above the maximum [8, 64]");
        assertThatThrownBy(() -> model.infer(inputs, Set.of("logits"), context()))
                .hasMessageContaining("has no output 'logits'");
        HostTensor shortMask = ids(new long[]{1, 1}, 1, 2);
        HostTensor mask = new HostTensor("attention_mask", DataType.INT64, new long[]{1, 2}, shortMask.data());
        assertThatThrownBy(() -> model.infer(List.of(ids(new long[]{1, 2, 3}, 1, 3), mask), Set.of(), context()))
                .hasMessageContaining("attention_mask has shape [1, 2], expected [1, 3]");
        assertThat(requests.peakBytes()).isZero();
    }

    @Test
    void anAttentionMaskValueOtherThanZeroOrOneIsRejected() {
        HostTensor mask = new HostTensor("attention_mask", DataType.INT64, new long[]{1, 3},
                ids(new long[]{1, 2, 0}, 1, 3).data());
        assertThatThrownBy(() -> model.infer(List.of(ids(new long[]{1, 2, 3}, 1, 3), mask), Set.of(), context()))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("attention_mask[0, 1] = 2, expected 0 (padding) or 1 (token)");
        assertThat(requests.peakBytes()).isZero();
    }

    private static HostTensor ids(long[] values, int batch, int seq) {
        MemorySegment data = Arena.ofAuto().allocate((long) values.length * 8, 8);
        MemorySegment.copy(values, 0, data, ValueLayout.JAVA_LONG, 0, values.length);
        return new HostTensor("input_ids", DataType.INT64, new long[]{batch, seq}, data);
    }
}
