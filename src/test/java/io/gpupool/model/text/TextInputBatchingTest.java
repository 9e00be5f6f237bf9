package io.gpupool.model.text;

import io.gpupool.model.BatchableModel;
import io.gpupool.model.BytesElements;
import io.gpupool.model.DataType;
import io.gpupool.model.ExecutionContext;
import io.gpupool.model.HostTensor;
import io.gpupool.model.InferenceModel;
import io.gpupool.model.ModelConfig;
import io.gpupool.model.ModelSignature;
import io.gpupool.model.TensorSpec;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import java.lang.foreign.ValueLayout;
import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;

import static org.assertj.core.api.Assertions.assertThat;

/** A BERT folder with a tokenizer keeps batching: text is tokenised before the request joins a batch. */
class TextInputBatchingTest {

    private static TextTokenizer tokenizer;

    @BeforeAll
    static void load() {
        tokenizer = TextTokenizer.load(Path.of("models/tiny-bert/tokenizer.json"), 64);
    }

    @AfterAll
    static void close() {
        tokenizer.close();
    }

    @Test
    void aTextRequestJoinsTheBatchAsTheTokensTheTokenizerGives() {
        RecordingModel bert = new RecordingModel();
        InferenceModel text = TextInputModel.wrap(bert, tokenizer);
        assertThat(text).isInstanceOf(BatchableModel.class);

        byte[] strings = BytesElements.encode(List.of("hello world".getBytes(StandardCharsets.UTF_8)));
        ((BatchableModel) text).prepare(List.of(new HostTensor(TextInputModel.TEXT, DataType.BYTES, new long[]{1},
                MemorySegment.ofArray(strings))), Set.of("pooler_output"));

        TextTokenizer.Batch expected = tokenizer.encode(List.of("hello world"));
        assertThat(bert.prepared).extracting(HostTensor::name).containsExactly("input_ids", "attention_mask");
        assertThat(bert.prepared.get(0).data().toArray(ValueLayout.JAVA_LONG)).containsExactly(expected.ids());
        assertThat(bert.prepared.get(1).data().toArray(ValueLayout.JAVA_LONG)).containsExactly(expected.attentionMask());
        assertThat(((BatchableModel) text).batchLayout()).isEqualTo("packed");
    }

    @Test
    void aModelThatDoesNotBatchStaysUnbatchedBehindText() {
        InferenceModel plain = new RecordingModel().unbatched();
        assertThat(TextInputModel.wrap(plain, tokenizer)).isNotInstanceOf(BatchableModel.class);
    }

    /** Records what it is asked to batch; declares the token inputs a text model needs. */
    private static final class RecordingModel implements BatchableModel {

        final List<HostTensor> prepared = new ArrayList<>();

        private static final ModelSignature SIGNATURE = new ModelSignature("bert", "1", "test",
                List.of(new TensorSpec("input_ids", DataType.INT64, new long[]{-1, -1}),
                        new TensorSpec("attention_mask", DataType.INT64, new long[]{-1, -1})),
                List.of(new TensorSpec("pooler_output", DataType.FP32, new long[]{-1, 4})), 8, 64);

        @Override
        public ModelSignature signature() {
            return SIGNATURE;
        }

        @Override
        public List<HostTensor> infer(List<HostTensor> inputs, Set<String> requestedOutputs, ExecutionContext context) {
            throw new AssertionError("not run alone in this test");
        }

        @Override
        public Member prepare(List<HostTensor> inputs, Set<String> requestedOutputs) {
            prepared.addAll(inputs);
            return new Member() {
                public int rows() { return 1; }
                public int tokens() { return (int) inputs.getFirst().shape()[1]; }
                public int sequenceLength() { return (int) inputs.getFirst().shape()[1]; }
            };
        }

        @Override
        public long batchPeakBytes(List<? extends Member> members) {
            return 0;
        }

        @Override
        public List<List<HostTensor>> inferBatch(List<? extends Member> members, ExecutionContext context) {
            return List.of();
        }

        @Override
        public String batchLayout() {
            return "packed";
        }

        @Override
        public ModelConfig.Batching batching() {
            return ModelConfig.Batching.UNSET;
        }

        @Override
        public void close() {
        }

        /** The same signature without batching. */
        InferenceModel unbatched() {
            RecordingModel self = this;
            return new InferenceModel() {
                public ModelSignature signature() { return self.signature(); }
                public List<HostTensor> infer(List<HostTensor> in, Set<String> out, ExecutionContext c) { return List.of(); }
                public void close() { }
            };
        }
    }
}
