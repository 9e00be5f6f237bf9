package io.gpupool.model.text;

import io.gpupool.model.BatchableModel;
import io.gpupool.model.BytesElements;
import io.gpupool.model.DataType;
import io.gpupool.model.ExecutionContext;
import io.gpupool.model.ForwardingBatchableModel;
import io.gpupool.model.HostTensor;
import io.gpupool.model.InferenceModel;
import io.gpupool.model.ModelSignature;
import io.gpupool.model.PlannedMemory;
import io.gpupool.model.TensorSpec;

import java.lang.foreign.MemorySegment;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;

/**
 * A token model (BERT) that also takes text: besides its own inputs it declares {@code text} as
 * {@code BYTES [-1]} (one UTF-8 string per row). A request gives either {@code text} or
 * {@code input_ids}; text is tokenised here, on the request's worker thread, into {@code input_ids},
 * {@code attention_mask} and, where the model takes them, {@code token_type_ids}, and the wrapped model
 * runs on those as if the client had sent them. Everything else is the wrapped model's.
 */
public class TextInputModel implements InferenceModel, PlannedMemory {

    public static final String TEXT = "text";
    static final String INPUT_IDS = "input_ids";
    static final String ATTENTION_MASK = "attention_mask";
    static final String TOKEN_TYPE_IDS = "token_type_ids";

    final InferenceModel model;
    private final TextTokenizer tokenizer;
    private final List<TensorSpec> inputs;
    private final boolean takesTypes;

    /**
     * @param model a model with a {@code input_ids} and an {@code attention_mask} input, both INT64
     *              {@code [-1, -1]}; the padded rows of a batch need the mask
     * @throws IllegalArgumentException when the model does not have them
     */
    public TextInputModel(InferenceModel model, TextTokenizer tokenizer) {
        if (!declares(model, INPUT_IDS) || !declares(model, ATTENTION_MASK)) {
            throw new IllegalArgumentException("model '" + model.name() + "' has a " + TextTokenizer.FILE
                    + " but takes text only with inputs " + INPUT_IDS + " and " + ATTENTION_MASK + " INT64[-1, -1]; "
                    + "it declares " + model.inputs());
        }
        this.model = model;
        this.tokenizer = tokenizer;
        List<TensorSpec> all = new ArrayList<>(model.inputs());
        all.add(new TensorSpec(TEXT, DataType.BYTES, new long[]{-1}));
        this.inputs = List.copyOf(all);
        this.takesTypes = declares(model, TOKEN_TYPE_IDS);
    }

    private static boolean declares(InferenceModel model, String input) {
        return model.inputs().stream().anyMatch(spec -> spec.name().equals(input) && spec.dataType() == DataType.INT64
                && spec.shape().length == 2);
    }

    /**
     * The text model for {@code model}: one that also batches (its requests tokenised before they join a
     * batch) when {@code model} does.
     */
    public static TextInputModel wrap(InferenceModel model, TextTokenizer tokenizer) {
        return model instanceof BatchableModel batchable ? new Batchable(batchable, tokenizer)
                : new TextInputModel(model, tokenizer);
    }

    @Override
    public List<HostTensor> infer(List<HostTensor> requestInputs, Set<String> requestedOutputs, ExecutionContext context) {
        return model.infer(tokenized(requestInputs), requestedOutputs, context);
    }

    /** {@code requestInputs} as the wrapped model takes them: text replaced by its tokens, anything else as is. */
    List<HostTensor> tokenized(List<HostTensor> requestInputs) {
        HostTensor text = null;
        for (HostTensor input : requestInputs) {
            if (input.name().equals(TEXT)) {
                text = input;
            }
        }
        if (text == null) {
            return requestInputs;
        }
        if (requestInputs.size() > 1) {
            throw new IllegalArgumentException("give either '" + TEXT + "' or the token inputs, not both (got "
                    + requestInputs.stream().map(HostTensor::name).toList() + ")");
        }
        TextTokenizer.Batch batch = tokenizer.encode(strings(text));
        long[] shape = {batch.batch(), batch.sequence()};
        List<HostTensor> tokens = new ArrayList<>(3);
        tokens.add(new HostTensor(INPUT_IDS, DataType.INT64, shape, MemorySegment.ofArray(batch.ids())));
        tokens.add(new HostTensor(ATTENTION_MASK, DataType.INT64, shape, MemorySegment.ofArray(batch.attentionMask())));
        if (takesTypes) {
            tokens.add(new HostTensor(TOKEN_TYPE_IDS, DataType.INT64, shape, MemorySegment.ofArray(batch.typeIds())));
        }
        return tokens;
    }

    /** A text model over a batching model: requests are tokenised in {@link #prepare}, then batched as tokens. */
    static final class Batchable extends TextInputModel implements ForwardingBatchableModel {

        private final BatchableModel batchable;

        Batchable(BatchableModel model, TextTokenizer tokenizer) {
            super(model, tokenizer);
            this.batchable = model;
        }

        @Override
        public BatchableModel batchable() {
            return batchable;
        }

        @Override
        public Member prepare(List<HostTensor> inputs, Set<String> requestedOutputs) {
            return batchable.prepare(tokenized(inputs), requestedOutputs);
        }
    }

    /** The rows of a text input as strings; refuses bytes that are not UTF-8 rather than guessing. */
    private static List<String> strings(HostTensor text) {
        List<String> rows = new ArrayList<>();
        int row = 0;
        for (byte[] element : BytesElements.decode(text.data())) {
            try {
                rows.add(StandardCharsets.UTF_8.newDecoder().onMalformedInput(CodingErrorAction.REPORT)
                        .onUnmappableCharacter(CodingErrorAction.REPORT).decode(ByteBuffer.wrap(element)).toString());
            } catch (CharacterCodingException e) {
                throw new IllegalArgumentException("'" + TEXT + "' element " + row + " is not UTF-8 text");
            }
            row++;
        }
        return rows;
    }

    public TextTokenizer tokenizer() {
        return tokenizer;
    }

    @Override
    public ModelSignature signature() {
        return new ModelSignature(model.name(), model.version(), model.platform(), inputs, model.outputs(),
                model.maxBatchSize(), model.maxSequenceLength(), model.signature().classLabels());
    }

    @Override
    public long weightBytes() {
        return model.weightBytes();
    }

    @Override
    public long peakActivationBytes(int batch, int seq) {
        return model instanceof PlannedMemory planned ? planned.peakActivationBytes(batch, seq) : 0;
    }

    @Override
    public long peakActivationBytes(int batch, int seq, java.util.function.LongUnaryOperator blockBytes) {
        return model instanceof PlannedMemory planned ? planned.peakActivationBytes(batch, seq, blockBytes) : 0;
    }

    @Override
    public long largestActivationBytes(int batch, int seq) {
        return model instanceof PlannedMemory planned ? planned.largestActivationBytes(batch, seq) : 0;
    }

    @Override
    public void close() {
        try {
            model.close();
        } finally {
            tokenizer.close();
        }
    }
}
