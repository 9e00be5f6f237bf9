package io.gpupool.model.bert;

import io.gpupool.model.DataType;
import io.gpupool.model.HostTensor;
import io.gpupool.model.ShapePadding;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * Padding for BERT: token inputs [b, s] grow to [B, S] and the attention mask hides what was added,
 * so the encoder computes the real tokens exactly as unpadded (attention gives masked keys zero
 * weight; every other op works per token row; mean pooling is mask-weighted).
 * <pre>
 *            s        S                 ids / types: padding 0 (a valid id)
 *        b [ real    | 0 0 0 ]          mask:        padding 0; built all-ones over the real
 *          [ real    | 0 0 0 ]                       tokens when the request has none
 *        B [ 1 0 0 0   0 0 0 ]  <- padded sequences: one unmasked token, so their softmax is defined;
 *                                  their outputs are dropped
 * </pre>
 * Outputs [B, S, …] are cut to [b, s, …], outputs [B, …] to [b, …]. A request whose mask hides every
 * token of a sequence is not padded (softmax over nothing is spread over all positions, so padding
 * would change it): it runs unpadded.
 */
final class BertPadding implements ShapePadding {

    private static final ValueLayout.OfLong LONG = ValueLayout.JAVA_LONG_UNALIGNED;
    private static final ValueLayout.OfInt INT = ValueLayout.JAVA_INT_UNALIGNED;

    private final boolean acceptsMask;
    private final boolean acceptsTypes;

    /** @param acceptsMask, acceptsTypes whether the model's signature offers those inputs */
    BertPadding(boolean acceptsMask, boolean acceptsTypes) {
        this.acceptsMask = acceptsMask;
        this.acceptsTypes = acceptsTypes;
    }

    @Override
    public Shape shapeOf(List<HostTensor> inputs) {
        HostTensor ids = find(inputs, BertModel.INPUT_IDS);
        if (ids == null || !acceptsMask) {
            return null;
        }
        long[] shape = ids.shape();
        if (shape.length != 2 || shape[0] < 1 || shape[1] < 1 || shape[0] > Integer.MAX_VALUE
                || shape[1] > Integer.MAX_VALUE) {
            return null;
        }
        for (HostTensor input : inputs) {
            if (!Arrays.equals(input.shape(), shape) || !isInteger(input.dataType())) {
                return null;
            }
            if (!input.name().equals(BertModel.INPUT_IDS) && !input.name().equals(BertModel.ATTENTION_MASK)
                    && !(acceptsTypes && input.name().equals(BertModel.TOKEN_TYPE_IDS))) {
                return null;
            }
        }
        int batch = (int) shape[0];
        int seq = (int) shape[1];
        HostTensor mask = find(inputs, BertModel.ATTENTION_MASK);
        if (mask != null) {
            for (int b = 0; b < batch; b++) {
                boolean any = false;
                for (int s = 0; s < seq && !any; s++) {
                    any = read(mask, (long) b * seq + s) != 0;
                }
                if (!any) {
                    return null;
                }
            }
        }
        return new Shape(batch, seq);
    }

    @Override
    public List<HostTensor> pad(List<HostTensor> inputs, Shape padded, Arena arena) {
        HostTensor ids = find(inputs, BertModel.INPUT_IDS);
        long[] shape = ids.shape();
        int batch = (int) shape[0];
        int seq = (int) shape[1];
        List<HostTensor> out = new ArrayList<>(3);
        out.add(padTokens(ids, batch, seq, padded, arena, false));
        HostTensor mask = find(inputs, BertModel.ATTENTION_MASK);
        out.add(mask != null ? padTokens(mask, batch, seq, padded, arena, true)
                : onesMask(batch, seq, padded, arena));
        HostTensor types = find(inputs, BertModel.TOKEN_TYPE_IDS);
        if (types != null) {
            out.add(padTokens(types, batch, seq, padded, arena, false));
        }
        return out;
    }

    private static HostTensor padTokens(HostTensor tensor, int batch, int seq, Shape padded, Arena arena,
                                        boolean isMask) {
        int bp = padded.batch();
        int sp = padded.sequence();
        MemorySegment data = arena.allocate((long) bp * sp * Long.BYTES, 64);
        for (int b = 0; b < bp; b++) {
            for (int s = 0; s < sp; s++) {
                long value;
                if (b < batch && s < seq) {
                    value = read(tensor, (long) b * seq + s);
                } else {
                    value = isMask && b >= batch && s == 0 ? 1 : 0;
                }
                data.setAtIndex(LONG, (long) b * sp + s, value);
            }
        }
        return new HostTensor(tensor.name(), DataType.INT64, new long[] {bp, sp}, data);
    }

    private static HostTensor onesMask(int batch, int seq, Shape padded, Arena arena) {
        int bp = padded.batch();
        int sp = padded.sequence();
        MemorySegment data = arena.allocate((long) bp * sp * Long.BYTES, 64);
        for (int b = 0; b < bp; b++) {
            for (int s = 0; s < sp; s++) {
                boolean real = b < batch ? s < seq : s == 0;
                data.setAtIndex(LONG, (long) b * sp + s, real ? 1 : 0);
            }
        }
        return new HostTensor(BertModel.ATTENTION_MASK, DataType.INT64, new long[] {bp, sp}, data);
    }

    @Override
    public List<HostTensor> trim(List<HostTensor> outputs, Shape shape) {
        List<HostTensor> out = new ArrayList<>(outputs.size());
        Arena results = Arena.ofAuto();
        for (HostTensor tensor : outputs) {
            long[] from = tensor.shape();
            long[] to = from.clone();
            to[0] = shape.batch();
            boolean perToken = from.length >= 3;
            if (perToken) {
                to[1] = shape.sequence();
            }
            long element = tensor.dataType().byteSize();
            long rowBytes = element;                         // bytes of one [.., token] row
            for (int d = perToken ? 2 : 1; d < from.length; d++) {
                rowBytes *= from[d];
            }
            MemorySegment data = results.allocate(HostTensor.elementCount(to) * element, 64);
            long rowsPerSequenceFrom = perToken ? from[1] : 1;
            long rowsPerSequenceTo = perToken ? to[1] : 1;
            for (long b = 0; b < to[0]; b++) {
                MemorySegment.copy(tensor.data(), b * rowsPerSequenceFrom * rowBytes, data,
                        b * rowsPerSequenceTo * rowBytes, rowsPerSequenceTo * rowBytes);
            }
            out.add(new HostTensor(tensor.name(), tensor.dataType(), to, data));
        }
        return out;
    }

    private static boolean isInteger(DataType type) {
        return type == DataType.INT64 || type == DataType.INT32;
    }

    private static long read(HostTensor tensor, long index) {
        return tensor.dataType() == DataType.INT64 ? tensor.data().getAtIndex(LONG, index)
                : tensor.data().getAtIndex(INT, index);
    }

    private static HostTensor find(List<HostTensor> tensors, String name) {
        for (HostTensor tensor : tensors) {
            if (tensor.name().equals(name)) {
                return tensor;
            }
        }
        return null;
    }
}
