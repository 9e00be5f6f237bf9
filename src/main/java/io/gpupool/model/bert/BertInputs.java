package io.gpupool.model.bert;

import io.gpupool.model.DataType;
import io.gpupool.model.HostTensor;
import io.gpupool.model.InferenceModel;
import io.gpupool.model.ModelConfig;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.SegmentAllocator;
import java.lang.foreign.ValueLayout;
import java.util.Arrays;
import java.util.List;

/**
 * A request's inputs as a client sends them, checked and converted to what the kernels read: {@code input_ids}
 * (required), {@code attention_mask} and {@code token_type_ids} (optional), INT64 or INT32 {@code [batch, seq]}, to
 * INT32 of the same shape. Every refusal is an {@link IllegalArgumentException} naming the model, the input and the
 * offending shape or value, so that a client gets a 4xx that says what to fix. {@link BertModel#infer} and
 * {@link BertBatching#prepare} both check here, so a request in a batch is refused with the message it gets alone.
 *
 * <pre>
 *   1. shape:   input_ids present, [batch ≥ 1, seq ≥ 1], within [max_batch_size, max_sequence_length]
 *   2. convert: ids in [0, vocab_size), types in [0, type_vocab_size), mask 0 or 1; the others shaped like input_ids
 * </pre>
 * The caller selects the outputs between the two steps, so that a wrong output name is reported before a wrong id.
 */
final class BertInputs {

    /** A request's tokens as INT32 {@code batch × seq}, row-major; mask and types null where not sent. */
    record Tokens(int batch, int seq, MemorySegment ids, MemorySegment mask, MemorySegment types) {
    }

    /** The model whose name and limits the messages and checks use. */
    private final InferenceModel model;
    private final ModelConfig.Bert arch;

    BertInputs(InferenceModel model, ModelConfig.Bert arch) {
        this.model = model;
        this.arch = arch;
    }

    /** Step 1: the shape of {@code input_ids}, checked. */
    long[] shape(List<HostTensor> inputs) {
        HostTensor ids = find(inputs, BertModel.INPUT_IDS);
        if (ids == null) {
            throw new IllegalArgumentException("model '" + model.name() + "': input '" + BertModel.INPUT_IDS
                    + "' is required");
        }
        long[] shape = ids.shape();
        if (shape.length != 2 || shape[0] < 1 || shape[1] < 1) {
            throw new IllegalArgumentException("model '" + model.name() + "': " + BertModel.INPUT_IDS + " has shape "
                    + Arrays.toString(shape) + ", expected [batch >= 1, sequence >= 1]");
        }
        if (shape[0] > model.maxBatchSize() || shape[1] > model.maxSequenceLength()) {
            throw new IllegalArgumentException("model '" + model.name() + "': " + BertModel.INPUT_IDS + " has shape "
                    + Arrays.toString(shape) + ", above the maximum [" + model.maxBatchSize() + ", "
                    + model.maxSequenceLength() + "]");
        }
        return shape;
    }

    /** Step 2: the inputs of {@link #shape}'s {@code shape} as INT32, allocated from {@code arena}, checked. */
    Tokens convert(SegmentAllocator arena, List<HostTensor> inputs, long[] shape) {
        MemorySegment ids = toInt32(arena, find(inputs, BertModel.INPUT_IDS), shape, arch.vocabSize(), "vocab_size");
        HostTensor maskInput = find(inputs, BertModel.ATTENTION_MASK);
        HostTensor typeInput = find(inputs, BertModel.TOKEN_TYPE_IDS);
        MemorySegment mask = maskInput == null ? null : toMask(arena, maskInput, shape);
        MemorySegment types = typeInput == null ? null
                : toInt32(arena, typeInput, shape, arch.typeVocabSize(), "type_vocab_size");
        return new Tokens((int) shape[0], (int) shape[1], ids, mask, types);
    }

    private static HostTensor find(List<HostTensor> tensors, String name) {
        for (HostTensor tensor : tensors) {
            if (tensor.name().equals(name)) {
                return tensor;
            }
        }
        return null;
    }

    /** INT64 (or INT32) ids to INT32, each checked against {@code [0, limit)}. */
    private MemorySegment toInt32(SegmentAllocator arena, HostTensor tensor, long[] shape, int limit,
                                  String limitName) {
        checkShape(tensor, shape);
        int n = (int) tensor.elementCount();
        MemorySegment out = arena.allocate((long) n * Integer.BYTES, 64);
        for (int i = 0; i < n; i++) {
            long value = readInteger(tensor, i);
            if (value < 0 || value >= limit) {
                throw new IllegalArgumentException("model '" + model.name() + "': " + tensor.name() + "["
                        + (i / shape[1]) + ", " + (i % shape[1]) + "] = " + value + ", expected 0 <= id < "
                        + limitName + " = " + limit);
            }
            out.setAtIndex(ValueLayout.JAVA_INT, i, (int) value);
        }
        return out;
    }

    /**
     * Attention mask to INT32, each value 0 or 1 as transformers defines it; any other value is refused
     * rather than read as "non-zero", since a client sending one meant something the model does not do.
     */
    private MemorySegment toMask(SegmentAllocator arena, HostTensor tensor, long[] shape) {
        checkShape(tensor, shape);
        int n = (int) tensor.elementCount();
        MemorySegment out = arena.allocate((long) n * Integer.BYTES, 64);
        for (int i = 0; i < n; i++) {
            long value = readInteger(tensor, i);
            if (value != 0 && value != 1) {
                throw new IllegalArgumentException("model '" + model.name() + "': " + tensor.name() + "["
                        + (i / shape[1]) + ", " + (i % shape[1]) + "] = " + value
                        + ", expected 0 (padding) or 1 (token)");
            }
            out.setAtIndex(ValueLayout.JAVA_INT, i, (int) value);
        }
        return out;
    }

    private void checkShape(HostTensor tensor, long[] shape) {
        if (!Arrays.equals(tensor.shape(), shape)) {
            throw new IllegalArgumentException("model '" + model.name() + "': " + tensor.name() + " has shape "
                    + Arrays.toString(tensor.shape()) + ", expected " + Arrays.toString(shape) + " like "
                    + BertModel.INPUT_IDS);
        }
        if (tensor.dataType() != DataType.INT64 && tensor.dataType() != DataType.INT32) {
            throw new IllegalArgumentException("model '" + model.name() + "': " + tensor.name() + " is "
                    + tensor.dataType() + ", expected INT64");
        }
    }

    private static long readInteger(HostTensor tensor, int index) {
        return tensor.dataType() == DataType.INT64
                ? tensor.data().getAtIndex(ValueLayout.JAVA_LONG_UNALIGNED, index)
                : tensor.data().getAtIndex(ValueLayout.JAVA_INT_UNALIGNED, index);
    }
}
