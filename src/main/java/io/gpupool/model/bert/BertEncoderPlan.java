package io.gpupool.model.bert;

import io.gpupool.backend.DeviceStream;
import io.gpupool.kernels.TensorOps.Activation;
import io.gpupool.kernels.TensorOps.Pooling;
import io.gpupool.model.DeviceWeights;
import io.gpupool.model.ModelConfig;
import io.gpupool.model.plan.ExecutionPlan;

import java.lang.foreign.MemorySegment;
import java.util.LinkedHashMap;
import java.util.Map;

import static io.gpupool.model.plan.ExecutionPlan.ids;

/**
 * The op sequence of a BERT forward, written once for the two ways a forward lays out its tokens: padded
 * ({@link BertModel}: B sequences of S tokens, one request, or a batch padded to its longest sequence) and packed
 * ({@link PackedBertForward}: N sequences of their own lengths Lᵢ concatenated, T = Σ Lᵢ, a batch of requests).
 *
 * <p>Every op but the embeddings, attention and pooling works row by row on the token rows, so the two forwards
 * differ only where an op must know which rows form a sequence. A {@link TokenLayout} supplies exactly those
 * steps; everything else is declared here, in this order:
 * <pre>
 *                           padded: rows = B·S, shape (B, S)          packed: rows = T, shape (N, T)
 *   inputs                  ids, mask, types [B,S]                    ids, mask, types, positions [T], offsets [N+1]
 *   embeddings              embeddingLayerNorm (one fused step)       packedEmbeddingSum, then addLayerNorm
 *   attention               attention(qkv, mask, workspace)           varlenAttention(qkv, mask, offsets, S*)
 *   pooling                 pool(h, mask) per row of S tokens          packedPool(h, mask, offsets)
 *
 *   layout.inputs, layout.embed                                        h    [rows,H]
 *   L x {  qkv  = h · Wqkv + bqkv                                      [rows,3H]   (Wq;Wk;Wv concatenated)
 *          ctx  = layout.attend(qkv)                                   [rows,H]    a sequence sees its own rows
 *          h1   = LayerNorm(ctx · Wo + bo + h)                         one linearAddLayerNorm step each:
 *          h    = LayerNorm(act(h1 · Wi + bi) · Wo2 + bo2 + h1) }      the residual added in the product where
 *                                                                      the backend can (cuBLASLt), else in the norm
 *   last_hidden_state = h                                              [rows,H]
 *   pooler_output     = tanh(layout.pool(h, CLS) · Wp + bp)            [sequences,H]   if the pooler is present
 *                                                                      (products run only when pooler_output or
 *                                                                      logits is downloaded)
 *   embedding         = layout.pool(h, mask, serving pooling)          [sequences,H]   (CLS with a pooler: the
 *                                                                                      pooler's CLS rows, no 2nd gather)
 *   logits            = pooler_output · Wc + bc                        [sequences,C]   if a classifier is present
 *   bf16 activations: each output widened to FP32 (toFloat32) when the forward downloads it
 *   download the requested outputs into the state's host buffers
 * </pre>
 * A plan is invoked with the layout's shape, so every tensor size, and so the planned peak, is that of the
 * shape the forward really has. Because the shared ops see the same rows in both layouts, and attention and pooling
 * the same rows of the same sequence, a request's rows of a packed forward are what it gets alone.
 */
final class BertEncoderPlan {

    /**
     * What the shared steps read of a forward's host state: its INT32 token inputs (mask and types null when the
     * forward has none) and, per output tensor id, the host buffer to fill.
     */
    interface State {
        MemorySegment ids();

        MemorySegment mask();

        MemorySegment types();

        Map<Integer, MemorySegment> outputs();
    }

    /** Copies the state's token inputs to their tensors, for a layout's upload step; absent ones are skipped. */
    static void uploadTokens(ExecutionPlan.Invocation inv, int ids, int mask, int types) {
        State state = inv.state();
        DeviceStream stream = inv.context().stream();
        stream.copyHostToDevice(state.ids(), inv.address(ids), state.ids().byteSize());
        if (state.mask() != null) {
            stream.copyHostToDevice(state.mask(), inv.address(mask), state.mask().byteSize());
        }
        if (state.types() != null) {
            stream.copyHostToDevice(state.types(), inv.address(types), state.types().byteSize());
        }
    }

    /** The input tensors a forward may lack, so that {@link ExecutionPlan#run} can be told they are absent. */
    record OptionalInputs(int mask, int types) {
    }

    /** The embedding tables and their LayerNorm, as device addresses. */
    record Embeddings(long word, long position, long tokenType, long gamma, long beta, int hidden, float eps) {
    }

    /** How a forward addresses its tokens: the steps that depend on which rows form a sequence. */
    interface TokenLayout {

        /** The size of a tensor of {@code bytesPerRow} bytes per token row, at the layout's invocation shape. */
        ExecutionPlan.Size perToken(long bytesPerRow);

        /** Token rows of an invocation: B·S padded, T packed. */
        int rows(ExecutionPlan.Invocation inv);

        /** Declares the input tensors and the step that uploads them from the state. */
        OptionalInputs inputs(ExecutionPlan.Builder b);

        /** Declares the steps that embed every token and normalise it; returns h [rows, H]. */
        int embed(ExecutionPlan.Builder b, Embeddings embeddings);

        /**
         * Declares the attention of one layer (step {@code layerPrefix + "attention"}): qkv [rows, 3H] to the
         * context [rows, H], each sequence over its own tokens, the masked ones left out; returns the context.
         */
        int attend(ExecutionPlan.Builder b, String layerPrefix, int qkv);

        /**
         * Declares step {@code step}: one row per sequence of {@code hidden} into {@code out}, its first token
         * (CLS) or {@code pooling} over the tokens the mask keeps ({@code masked}: the mask is read); the step enqueues
         * nothing when {@code readers} says no output it feeds is downloaded.
         */
        void pool(ExecutionPlan.Builder b, String step, int hidden, boolean masked, Pooling pooling, int out,
                  Readers readers);
    }

    /** The built plan and the tensor ids its owner needs. */
    record Built(ExecutionPlan plan, OptionalInputs inputs, Map<String, Integer> outputTensors) {
    }

    private BertEncoderPlan() {
    }

    /**
     * Builds the forward of {@code model}'s weights under {@code prefix} on {@code layout}.
     *
     * @param elem         bytes per activation element (2: bf16, and then every output gets a widening step)
     * @param requestArena run each forward in one arena ({@link ExecutionPlan.Builder#requestArena})
     */
    static Built build(TokenLayout layout, BertModel model, String prefix, boolean pooler, int elem,
                       boolean requestArena) {
        ModelConfig.Bert arch = model.arch();
        DeviceWeights weights = model.weights();
        int numLabels = model.numLabels();
        int h = arch.hiddenSize();
        int inter = arch.intermediateSize();
        float eps = arch.layerNormEps();
        ExecutionPlan.Size tokensH = layout.perToken((long) h * elem);
        ExecutionPlan.Size sequencesH = (sequences, tokens) -> (long) sequences * h * elem;
        ExecutionPlan.Size sequencesC = (sequences, tokens) -> (long) sequences * numLabels * elem;
        ExecutionPlan.Builder b = ExecutionPlan.builder().requestArena(requestArena);
        OptionalInputs inputs = layout.inputs(b);
        int hidden = layout.embed(b, new Embeddings(
                weights.address(prefix + "embeddings.word_embeddings.weight"),
                weights.address(prefix + "embeddings.position_embeddings.weight"),
                weights.address(prefix + "embeddings.token_type_embeddings.weight"),
                weights.address(prefix + "embeddings.LayerNorm.weight"),
                weights.address(prefix + "embeddings.LayerNorm.bias"), h, eps));
        Activation act = arch.hiddenAct();
        for (int layer = 0; layer < arch.numHiddenLayers(); layer++) {
            String p = prefix + "encoder.layer." + layer + ".";
            BertLayerWeights w = BertLayerWeights.of(weights, p);
            int in = hidden;
            int qkv = b.tensor(p + "qkv", layout.perToken(3L * h * elem));
            b.step(p + "qkv", ids(in), ids(qkv), inv -> inv.context().ops().linear(inv.context().stream(),
                    inv.address(in), w.qkv(), w.qkvBias(), inv.address(qkv), layout.rows(inv), h, 3 * h,
                    Activation.NONE));
            int context = layout.attend(b, p, qkv);
            int h1 = b.tensor(p + "attention.output", tokensH);
            b.step(p + "attention.output", ids(context, in), ids(h1), inv -> inv.context().ops().linearAddLayerNorm(
                    inv.context().stream(), inv.address(context), w.attentionOut(), w.attentionOutBias(),
                    inv.address(in), w.attentionNorm(), w.attentionNormBias(), inv.address(h1), layout.rows(inv), h, h,
                    eps));
            int mid = b.tensor(p + "intermediate", layout.perToken((long) inter * elem));
            b.step(p + "intermediate.dense", ids(h1), ids(mid), inv -> inv.context().ops().linear(
                    inv.context().stream(), inv.address(h1), w.intermediate(), w.intermediateBias(), inv.address(mid),
                    layout.rows(inv), h, inter, act));
            int h2 = b.tensor(p + "output", tokensH);
            b.step(p + "output", ids(mid, h1), ids(h2), inv -> inv.context().ops().linearAddLayerNorm(
                    inv.context().stream(), inv.address(mid), w.output(), w.outputBias(), inv.address(h1),
                    w.outputNorm(), w.outputNormBias(), inv.address(h2), layout.rows(inv), inter, h, eps));
            hidden = h2;
        }
        int last = hidden;
        Map<String, Integer> outs = new LinkedHashMap<>();
        outs.put(BertModel.LAST_HIDDEN_STATE, last);
        int pooled = -1;
        int cls = -1;
        Readers clsReaders = new Readers();
        Readers poolerReaders = new Readers();
        Readers classifierReaders = new Readers();
        Readers embeddingReaders = new Readers();
        if (pooler) {
            long wp = weights.address(prefix + "pooler.dense.weight");
            long bp = weights.address(prefix + "pooler.dense.bias");
            cls = b.tensor("pooler.cls", sequencesH);
            layout.pool(b, "pooler.cls", last, false, Pooling.CLS, cls, clsReaders);
            int pooledTensor = b.tensor(BertModel.POOLER_OUTPUT, sequencesH);
            int clsRows = cls;
            b.step("pooler.dense", ids(clsRows), ids(pooledTensor), inv -> {
                if (poolerReaders.anyDownloaded(inv.state())) {
                    inv.context().ops().linear(inv.context().stream(), inv.address(clsRows), wp, bp,
                            inv.address(pooledTensor), inv.batch(), h, h, Activation.TANH);
                }
            });
            outs.put(BertModel.POOLER_OUTPUT, pooledTensor);
            pooled = pooledTensor;
        }
        Pooling serving = model.config().serving().pooling();
        int embedding;
        if (serving == Pooling.CLS && cls >= 0) {
            embedding = cls;                      // the pooler's CLS rows already are the embedding: no second gather
        } else {
            embedding = b.tensor(BertModel.EMBEDDING, sequencesH);
            layout.pool(b, "embedding", last, true, serving, embedding, embeddingReaders);
        }
        outs.put(BertModel.EMBEDDING, embedding);
        if (numLabels > 0) {
            long wc = weights.address("classifier.weight");
            long bc = weights.address("classifier.bias");
            int logits = b.tensor(BertModel.LOGITS, sequencesC);
            int from = pooled;
            b.step("classifier", ids(from), ids(logits), inv -> {
                if (classifierReaders.anyDownloaded(inv.state())) {
                    inv.context().ops().linear(inv.context().stream(), inv.address(from), wc, bc, inv.address(logits),
                            inv.batch(), h, numLabels, Activation.NONE);
                }
            });
            outs.put(BertModel.LOGITS, logits);
        }
        if (elem != Float.BYTES) {
            outs = widened(b, outs, tokensH, sequencesH, sequencesC, elem);
        }
        poolerReaders.set(outs.get(BertModel.POOLER_OUTPUT), outs.get(BertModel.LOGITS));
        classifierReaders.set(outs.get(BertModel.LOGITS));
        boolean sharedCls = embedding == cls;
        clsReaders.set(outs.get(BertModel.POOLER_OUTPUT), outs.get(BertModel.LOGITS),
                sharedCls ? outs.get(BertModel.EMBEDDING) : null);
        embeddingReaders.set(outs.get(BertModel.EMBEDDING));
        int[] outputIds = outs.values().stream().mapToInt(Integer::intValue).toArray();
        b.step("download outputs", outputIds, ids(), inv -> {
            State state = inv.state();
            for (Map.Entry<Integer, MemorySegment> e : state.outputs().entrySet()) {
                inv.context().stream().copyDeviceToHost(inv.address(e.getKey()), e.getValue(), e.getValue().byteSize());
            }
        });
        return new Built(b.build(), inputs, Map.copyOf(outs));
    }

    /**
     * The downloaded tensors a step's result ends up in (itself or its widened copy, or an output computed from it),
     * set once the outputs are final: pooling, the pooler and the classifier run only when a request downloads one of
     * them, since their gathers, products and tanh pass are launches a request for other outputs does not need. Whether an
     * output is asked for is part of a CUDA graph's key, so a graph recorded without them is never replayed for a
     * request that wants them.
     */
    static final class Readers {
        private int[] tensors = new int[0];

        void set(Integer... downloaded) {
            tensors = java.util.Arrays.stream(downloaded).filter(java.util.Objects::nonNull).mapToInt(Integer::intValue)
                    .toArray();
        }

        boolean anyDownloaded(State state) {
            for (int tensor : tensors) {
                if (state.outputs().containsKey(tensor)) {
                    return true;
                }
            }
            return false;
        }
    }

    /**
     * Under bf16 activations each output gets an FP32 tensor and a step that fills it when the forward downloads
     * that output; the FP32 tensors are what is downloaded. Returns the FP32 tensor of each output name.
     */
    private static Map<String, Integer> widened(ExecutionPlan.Builder b, Map<String, Integer> outs,
                                                ExecutionPlan.Size tokensH, ExecutionPlan.Size sequencesH,
                                                ExecutionPlan.Size sequencesC, int elem) {
        Map<String, Integer> wide = new LinkedHashMap<>();
        for (Map.Entry<String, Integer> e : outs.entrySet()) {
            int narrow = e.getValue();
            ExecutionPlan.Size narrowSize = e.getKey().equals(BertModel.LAST_HIDDEN_STATE) ? tokensH
                    : e.getKey().equals(BertModel.LOGITS) ? sequencesC : sequencesH;
            int fp32 = b.tensor(e.getKey() + ".fp32", (bs, s) -> narrowSize.bytes(bs, s) / elem * Float.BYTES);
            b.step(e.getKey() + ".toFloat32", ids(narrow), ids(fp32), inv -> {
                State state = inv.state();
                if (state.outputs().containsKey(fp32)) {
                    inv.context().ops().toFloat32(inv.context().stream(), inv.address(narrow), inv.address(fp32),
                            narrowSize.bytes(inv.batch(), inv.seq()) / elem);
                }
            });
            wide.put(e.getKey(), fp32);
        }
        return wide;
    }
}
