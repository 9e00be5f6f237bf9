package io.gpupool.model.bert;

import io.gpupool.backend.DeviceStream;
import io.gpupool.kernels.TensorOps.Activation;
import io.gpupool.kernels.TensorOps.Pooling;
import io.gpupool.model.DeviceWeights;
import io.gpupool.model.ExecutionContext;
import io.gpupool.model.ModelConfig;
import io.gpupool.model.plan.ExecutionPlan;

import java.lang.foreign.MemorySegment;
import java.util.LinkedHashMap;
import java.util.Map;

import static io.gpupool.model.plan.ExecutionPlan.ids;

/**
 * {@link BertModel}'s forward over packed sequences: the tokens of several requests concatenated into one
 * [T, H] matrix with no padding between them, on the same weights.
 *
 * <p>Notation: N sequences (the requests' batch rows together), sequence i of length Lᵢ (its request's
 * sequence length, the client's own padding included), T = Σ Lᵢ token rows, H hidden.
 * <pre>
 *   rows   0 .. L₀-1 | L₀ .. L₀+L₁-1 | ... | T-L_{N-1} .. T-1
 *          sequence 0 | sequence 1     | ... | sequence N-1
 *   offsets = [0, L₀, L₀+L₁, ..., T]          INT32 [N+1]   where each sequence starts
 *   positions[t] = t - offsets[i(t)]          INT32 [T]     position ids restart per sequence
 *
 *   packedEmbeddingSum(ids, types, positions) + LayerNorm                 h [T,H]
 *   L x { qkv = h · Wqkv + bqkv                 [T,3H]    row-wise, as padded
 *         ctx = varlenAttention(qkv, offsets)   [T,H]     sequence i attends to its own rows only
 *         ... dense, LayerNorm, GELU, dense, LayerNorm: row-wise, as padded }
 *   last_hidden_state = h                                  [T,H]
 *   pooler_output = tanh(packedPool(h, CLS) · Wp + bp)     [N,H]
 *   embedding     = packedPool(h, mask, pooling)           [N,H]
 *   logits        = pooler_output · Wc + bc                [N,C]
 * </pre>
 * Every row-wise op sees the same row as it would alone, and attention and pooling the same rows of the same
 * sequence, so a request's slice of the outputs is what it gets alone (on the host backend bit for bit; on
 * CUDA up to the order of FP32 sums). Its {@link ExecutionPlan} is invoked with {@code batch = N} and
 * {@code seq = T}, so its planned peak is that of the packed shape.
 */
final class PackedBertForward {

    /** Host-side state of one packed forward: INT32 inputs of T (offsets: N+1) and the output buffers. */
    record Batch(MemorySegment ids, MemorySegment mask, MemorySegment types, MemorySegment positions,
                 MemorySegment offsets, int maxSeq, Map<Integer, MemorySegment> outputs) {
    }

    private final ExecutionPlan plan;
    private final int maskTensor;
    private final int typesTensor;
    /** Device tensor id of each output name. */
    private final Map<String, Integer> outputTensors;

    PackedBertForward(BertModel model, String prefix, boolean pooler) {
        ModelConfig.Bert arch = model.arch();
        DeviceWeights weights = model.weights();
        int numLabels = model.numLabels();
        int h = arch.hiddenSize();
        int heads = arch.numAttentionHeads();
        int headDim = arch.headDim();
        int inter = arch.intermediateSize();
        float eps = arch.layerNormEps();
        // (n, t): n sequences, t packed tokens.
        ExecutionPlan.Size tokensInt = (n, t) -> (long) t * Integer.BYTES;
        ExecutionPlan.Size tokensH = (n, t) -> (long) t * h * Float.BYTES;
        ExecutionPlan.Size sequencesH = (n, t) -> (long) n * h * Float.BYTES;
        ExecutionPlan.Builder b = ExecutionPlan.builder();
        int idsTensor = b.tensor(BertModel.INPUT_IDS, tokensInt);
        maskTensor = b.optionalTensor(BertModel.ATTENTION_MASK, tokensInt);
        typesTensor = b.optionalTensor(BertModel.TOKEN_TYPE_IDS, tokensInt);
        int positionsTensor = b.tensor("position_ids", tokensInt);
        int offsetsTensor = b.tensor("sequence_offsets", (n, t) -> (long) (n + 1) * Integer.BYTES);
        b.step("upload inputs", ids(), ids(idsTensor, maskTensor, typesTensor, positionsTensor, offsetsTensor), inv -> {
            Batch batch = inv.state();
            DeviceStream stream = inv.context().stream();
            stream.copyHostToDevice(batch.ids, inv.address(idsTensor), batch.ids.byteSize());
            if (batch.mask != null) {
                stream.copyHostToDevice(batch.mask, inv.address(maskTensor), batch.mask.byteSize());
            }
            if (batch.types != null) {
                stream.copyHostToDevice(batch.types, inv.address(typesTensor), batch.types.byteSize());
            }
            stream.copyHostToDevice(batch.positions, inv.address(positionsTensor), batch.positions.byteSize());
            stream.copyHostToDevice(batch.offsets, inv.address(offsetsTensor), batch.offsets.byteSize());
        });
        long word = weights.address(prefix + "embeddings.word_embeddings.weight");
        long position = weights.address(prefix + "embeddings.position_embeddings.weight");
        long tokenType = weights.address(prefix + "embeddings.token_type_embeddings.weight");
        long embGamma = weights.address(prefix + "embeddings.LayerNorm.weight");
        long embBeta = weights.address(prefix + "embeddings.LayerNorm.bias");
        int embSum = b.tensor("embeddings.sum", tokensH);
        b.step("embeddings", ids(idsTensor, typesTensor, positionsTensor), ids(embSum), inv -> inv.context().ops()
                .packedEmbeddingSum(inv.context().stream(), inv.address(idsTensor), inv.address(typesTensor),
                        inv.address(positionsTensor), word, position, tokenType, inv.address(embSum), inv.seq(), h));
        int embedded = b.tensor("embeddings.out", tokensH);
        b.step("embeddings.LayerNorm", ids(embSum), ids(embedded), inv -> inv.context().ops().addLayerNorm(
                inv.context().stream(), inv.address(embSum), 0, embGamma, embBeta, inv.address(embedded), inv.seq(), h,
                eps));
        int hidden = embedded;
        for (int layer = 0; layer < arch.numHiddenLayers(); layer++) {
            String p = prefix + "encoder.layer." + layer + ".";
            BertLayerWeights w = BertLayerWeights.of(weights, p);
            Activation act = arch.hiddenAct();
            int in = hidden;
            int qkv = b.tensor(p + "qkv", (n, t) -> 3L * t * h * Float.BYTES);
            b.step(p + "qkv", ids(in), ids(qkv), inv -> inv.context().ops().linear(inv.context().stream(),
                    inv.address(in), w.qkv(), w.qkvBias(), inv.address(qkv), inv.seq(), h, 3 * h, Activation.NONE));
            int context = b.tensor(p + "attention.context", tokensH);
            b.step(p + "attention", ids(qkv, maskTensor, offsetsTensor), ids(context), inv -> {
                Batch batch = inv.state();
                inv.context().ops().varlenAttention(inv.context().stream(), inv.address(qkv), inv.address(maskTensor),
                        inv.address(offsetsTensor), inv.address(context), inv.batch(), inv.seq(), batch.maxSeq, heads,
                        headDim);
            });
            int attnOut = b.tensor(p + "attention.output.dense", tokensH);
            b.step(p + "attention.output.dense", ids(context), ids(attnOut), inv -> inv.context().ops().linear(
                    inv.context().stream(), inv.address(context),
                    w.attentionOut(), w.attentionOutBias(), inv.address(attnOut), inv.seq(), h, h,
                    Activation.NONE));
            int h1 = b.tensor(p + "attention.output", tokensH);
            b.step(p + "attention.output.LayerNorm", ids(attnOut, in), ids(h1), inv -> inv.context().ops().addLayerNorm(
                    inv.context().stream(), inv.address(attnOut), inv.address(in),
                    w.attentionNorm(), w.attentionNormBias(), inv.address(h1), inv.seq(), h,
                    eps));
            int mid = b.tensor(p + "intermediate", (n, t) -> (long) t * inter * Float.BYTES);
            b.step(p + "intermediate.dense", ids(h1), ids(mid), inv -> inv.context().ops().linear(
                    inv.context().stream(), inv.address(h1),
                    w.intermediate(), w.intermediateBias(), inv.address(mid), inv.seq(), h, inter, act));
            int out = b.tensor(p + "output.dense", tokensH);
            b.step(p + "output.dense", ids(mid), ids(out), inv -> inv.context().ops().linear(inv.context().stream(),
                    inv.address(mid),
                    w.output(), w.outputBias(), inv.address(out), inv.seq(), inter, h, Activation.NONE));
            int h2 = b.tensor(p + "output", tokensH);
            b.step(p + "output.LayerNorm", ids(out, h1), ids(h2), inv -> inv.context().ops().addLayerNorm(
                    inv.context().stream(), inv.address(out), inv.address(h1),
                    w.outputNorm(), w.outputNormBias(), inv.address(h2), inv.seq(), h,
                    eps));
            hidden = h2;
        }
        int last = hidden;
        Map<String, Integer> outs = new LinkedHashMap<>();
        outs.put(BertModel.LAST_HIDDEN_STATE, last);
        int pooled = -1;
        if (pooler) {
            long wp = weights.address(prefix + "pooler.dense.weight");
            long bp = weights.address(prefix + "pooler.dense.bias");
            int cls = b.tensor("pooler.cls", sequencesH);
            b.step("pooler.cls", ids(last, offsetsTensor), ids(cls), inv -> inv.context().ops().packedPool(
                    inv.context().stream(), inv.address(last), 0, inv.address(offsetsTensor), inv.address(cls),
                    inv.batch(), inv.seq(), h, Pooling.CLS));
            int pooledTensor = b.tensor(BertModel.POOLER_OUTPUT, sequencesH);
            b.step("pooler.dense", ids(cls), ids(pooledTensor), inv -> inv.context().ops().linear(
                    inv.context().stream(), inv.address(cls), wp, bp, inv.address(pooledTensor), inv.batch(), h, h,
                    Activation.TANH));
            outs.put(BertModel.POOLER_OUTPUT, pooledTensor);
            pooled = pooledTensor;
        }
        Pooling pooling = model.config().serving().pooling();
        int embedding = b.tensor(BertModel.EMBEDDING, sequencesH);
        b.step("embedding", ids(last, maskTensor, offsetsTensor), ids(embedding), inv -> inv.context().ops().packedPool(
                inv.context().stream(), inv.address(last), inv.address(maskTensor), inv.address(offsetsTensor),
                inv.address(embedding), inv.batch(), inv.seq(), h, pooling));
        outs.put(BertModel.EMBEDDING, embedding);
        if (numLabels > 0) {
            long wc = weights.address("classifier.weight");
            long bc = weights.address("classifier.bias");
            int logits = b.tensor(BertModel.LOGITS, (n, t) -> (long) n * numLabels * Float.BYTES);
            int from = pooled;
            b.step("classifier", ids(from), ids(logits), inv -> inv.context().ops().linear(inv.context().stream(),
                    inv.address(from), wc, bc, inv.address(logits), inv.batch(), h, numLabels, Activation.NONE));
            outs.put(BertModel.LOGITS, logits);
        }
        this.outputTensors = Map.copyOf(outs);
        int[] outputIds = outs.values().stream().mapToInt(Integer::intValue).toArray();
        b.step("download outputs", outputIds, ids(), inv -> {
            Batch batch = inv.state();
            for (Map.Entry<Integer, MemorySegment> e : batch.outputs.entrySet()) {
                inv.context().stream().copyDeviceToHost(inv.address(e.getKey()), e.getValue(), e.getValue().byteSize());
            }
        });
        this.plan = b.build();
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
