package io.gpupool.model.bert;

import io.gpupool.backend.DeviceStream;
import io.gpupool.kernels.TensorOps.Pooling;
import io.gpupool.model.ExecutionContext;
import io.gpupool.model.ModelConfig;
import io.gpupool.model.plan.ExecutionPlan;

import java.lang.foreign.MemorySegment;
import java.util.LinkedHashMap;
import java.util.Map;

import static io.gpupool.model.plan.ExecutionPlan.ids;

/**
 * {@link BertModel}'s forward over packed sequences: the tokens of several requests concatenated into one
 * [T, H] matrix with no padding between them, on the same weights and the same op sequence
 * ({@link BertEncoderPlan}); only the steps that must know which rows form a sequence are its own.
 *
 * <p>Notation: N sequences (the requests' batch rows together), sequence i of length Lᵢ (its request's
 * sequence length, the client's own padding included), T = Σ Lᵢ token rows, H hidden.
 * <pre>
 *   rows   0 .. L₀-1 | L₀ .. L₀+L₁-1 | ... | T-L_{N-1} .. T-1
 *          sequence 0 | sequence 1     | ... | sequence N-1
 *   offsets = [0, L₀, L₀+L₁, ..., T]          INT32 [N+1]   where each sequence starts
 *   positions[t] = t - offsets[i(t)]          INT32 [T]     position ids restart per sequence
 *
 *   embeddings = LayerNorm(packedEmbeddingSum(ids, types, positions))      [T,H]
 *   attention  = varlenAttention(qkv, mask, offsets): sequence i attends to its own rows only
 *   pooling    = packedPool(h, mask, offsets): one row per sequence        [N,H]
 * </pre>
 * Every row-wise op sees the same row as it would alone, and attention and pooling the same rows of the same
 * sequence, so a request's slice of the outputs is what it gets alone (on the host backend bit for bit; on
 * CUDA up to the order of FP32 sums). Its {@link ExecutionPlan} is invoked with {@code batch = N} and
 * {@code seq = T}, so its planned peak is that of the packed shape; a batch replaying a CUDA graph runs it at its
 * bucket's N' ≥ N and T' ≥ T instead, the padding unseen by its members ({@link PackedPadding}).
 */
final class PackedBertForward {

    /** Host-side state of one packed forward: INT32 inputs of T (offsets: N+1) and the output buffers. */
    record Batch(MemorySegment ids, MemorySegment mask, MemorySegment types, MemorySegment positions,
                 MemorySegment offsets, int maxSeq, Map<Integer, MemorySegment> outputs)
            implements BertEncoderPlan.State {
    }

    private final ExecutionPlan plan;
    private final int maskTensor;
    private final int typesTensor;
    /** Device tensor id of each output name. */
    private final Map<String, Integer> outputTensors;

    /** @param elem bytes per activation element of the kernels it runs on (2: bf16) */
    PackedBertForward(BertModel model, String prefix, boolean pooler, int elem) {
        BertEncoderPlan.Built built = BertEncoderPlan.build(new PackedTokens(model.arch(), elem), model, prefix,
                pooler, elem, model.requestArena());
        this.plan = built.plan();
        this.maskTensor = built.inputs().mask();
        this.typesTensor = built.inputs().types();
        this.outputTensors = built.outputTensors();
    }

    /**
     * The packed layout of {@link BertEncoderPlan}: invoked as (N, T), T token rows; the offsets say where each
     * sequence starts, the positions restart at each offset. On FP32 activations the embeddings are summed and then
     * normalised (two steps, as the host and FP32 CUDA kernels were verified); on bf16 activations in one fused step,
     * because a bf16 LayerNorm cannot read the FP32 sum.
     */
    private static final class PackedTokens implements BertEncoderPlan.TokenLayout {

        private final int hidden;
        private final int heads;
        private final int headDim;
        private final int elem;
        private int idsTensor;
        private int maskTensor;
        private int typesTensor;
        private int positionsTensor;
        private int offsetsTensor;

        PackedTokens(ModelConfig.Bert arch, int elem) {
            this.elem = elem;
            this.hidden = arch.hiddenSize();
            this.heads = arch.numAttentionHeads();
            this.headDim = arch.headDim();
        }

        @Override
        public ExecutionPlan.Size perToken(long bytesPerRow) {
            return (sequences, tokens) -> (long) tokens * bytesPerRow;
        }

        @Override
        public int rows(ExecutionPlan.Invocation inv) {
            return inv.seq();
        }

        @Override
        public BertEncoderPlan.OptionalInputs inputs(ExecutionPlan.Builder b) {
            ExecutionPlan.Size tokensInt = perToken(Integer.BYTES);
            idsTensor = b.tensor(BertModel.INPUT_IDS, tokensInt);
            maskTensor = b.optionalTensor(BertModel.ATTENTION_MASK, tokensInt);
            typesTensor = b.optionalTensor(BertModel.TOKEN_TYPE_IDS, tokensInt);
            positionsTensor = b.tensor("position_ids", tokensInt);
            offsetsTensor = b.tensor("sequence_offsets", (n, t) -> (long) (n + 1) * Integer.BYTES);
            b.step("upload inputs", ids(), ids(idsTensor, maskTensor, typesTensor, positionsTensor, offsetsTensor),
                    inv -> {
                        BertEncoderPlan.uploadTokens(inv, idsTensor, maskTensor, typesTensor);
                        Batch batch = inv.state();
                        DeviceStream stream = inv.context().stream();
                        stream.copyHostToDevice(batch.positions, inv.address(positionsTensor),
                                batch.positions.byteSize());
                        stream.copyHostToDevice(batch.offsets, inv.address(offsetsTensor), batch.offsets.byteSize());
                    });
            return new BertEncoderPlan.OptionalInputs(maskTensor, typesTensor);
        }

        @Override
        public int embed(ExecutionPlan.Builder b, BertEncoderPlan.Embeddings e) {
            ExecutionPlan.Size tokensH = perToken((long) hidden * elem);
            if (elem != Float.BYTES) {
                int embedded = b.tensor("embeddings.out", tokensH);
                b.step("embeddings", ids(idsTensor, typesTensor, positionsTensor), ids(embedded), inv -> inv.context()
                        .ops().packedEmbeddingLayerNorm(inv.context().stream(), inv.address(idsTensor),
                                inv.address(typesTensor), inv.address(positionsTensor), e.word(), e.position(),
                                e.tokenType(), e.gamma(), e.beta(), inv.address(embedded), inv.seq(), hidden, e.eps()));
                return embedded;
            }
            int embSum = b.tensor("embeddings.sum", tokensH);
            b.step("embeddings", ids(idsTensor, typesTensor, positionsTensor), ids(embSum), inv -> inv.context().ops()
                    .packedEmbeddingSum(inv.context().stream(), inv.address(idsTensor), inv.address(typesTensor),
                            inv.address(positionsTensor), e.word(), e.position(), e.tokenType(), inv.address(embSum),
                            inv.seq(), hidden));
            int embedded = b.tensor("embeddings.out", tokensH);
            b.step("embeddings.LayerNorm", ids(embSum), ids(embedded), inv -> inv.context().ops().addLayerNorm(
                    inv.context().stream(), inv.address(embSum), 0, e.gamma(), e.beta(), inv.address(embedded),
                    inv.seq(), hidden, e.eps()));
            return embedded;
        }

        @Override
        public int attend(ExecutionPlan.Builder b, String layerPrefix, int qkv) {
            int context = b.tensor(layerPrefix + "attention.context", perToken((long) hidden * elem));
            b.step(layerPrefix + "attention", ids(qkv, maskTensor, offsetsTensor), ids(context), inv -> {
                Batch batch = inv.state();
                inv.context().ops().varlenAttention(inv.context().stream(), inv.address(qkv), inv.address(maskTensor),
                        inv.address(offsetsTensor), inv.address(context), inv.batch(), inv.seq(), batch.maxSeq, heads,
                        headDim);
            });
            return context;
        }

        @Override
        public void pool(ExecutionPlan.Builder b, String step, int states, boolean masked, Pooling pooling, int out,
                         BertEncoderPlan.Readers readers) {
            int[] reads = masked ? ids(states, maskTensor, offsetsTensor) : ids(states, offsetsTensor);
            b.step(step, reads, ids(out), inv -> {
                if (readers.anyDownloaded(inv.state())) {
                    inv.context().ops().packedPool(inv.context().stream(), inv.address(states),
                            masked ? inv.address(maskTensor) : 0, inv.address(offsetsTensor), inv.address(out),
                            inv.batch(), inv.seq(), hidden, pooling);
                }
            });
        }
    }

    /** Planned activation peak of one packed forward over {@code sequences} sequences of {@code tokens} in all. */
    long peakBytes(int sequences, int tokens, java.util.function.LongUnaryOperator blockBytes) {
        return plan.peakBytes(sequences, tokens, blockBytes);
    }

    /**
     * Runs one packed forward; {@code outputs} maps output names to host buffers of [T, H] (last hidden
     * state) or [N, ·] (the pooled outputs), filled when this returns.
     */
    void run(ExecutionContext context, int sequences, int tokens, Batch batch, Map<String, MemorySegment> outputs) {
        Map<Integer, MemorySegment> byTensor = new LinkedHashMap<>();
        outputs.forEach((name, buffer) -> byTensor.put(outputTensors.get(name), buffer));
        boolean[] absent = new boolean[plan.tensorCount()];
        absent[maskTensor] = batch.mask() == null;
        absent[typesTensor] = batch.types() == null;
        plan.run(context, sequences, tokens, absent, new Batch(batch.ids(), batch.mask(), batch.types(),
                batch.positions(), batch.offsets(), batch.maxSeq(), byTensor));
    }
}
