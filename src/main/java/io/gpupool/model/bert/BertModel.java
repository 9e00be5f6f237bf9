package io.gpupool.model.bert;

import io.gpupool.kernels.TensorOps;
import io.gpupool.model.BatchableModel;
import io.gpupool.model.DataType;
import io.gpupool.model.DeviceWeights;
import io.gpupool.model.ExecutionContext;
import io.gpupool.model.HostTensor;
import io.gpupool.model.LoadTarget;
import io.gpupool.model.ModelConfig;
import io.gpupool.model.ModelFormatException;
import io.gpupool.model.PlannedMemory;
import io.gpupool.model.ShapePadding;
import io.gpupool.model.TensorSpec;
import io.gpupool.model.plan.ExecutionPlan;
import io.gpupool.model.safetensors.SafetensorsFile;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;


/**
 * A BERT encoder as HuggingFace's {@code BertModel} computes it, from a checkpoint written by
 * {@code save_pretrained} (optionally {@code BertForSequenceClassification}: names prefixed
 * {@code bert.} plus {@code classifier.weight/bias}).
 *
 * <p>Notation: B batch, S sequence, B·S token rows, H hidden, L layers.
 * <pre>
 *   ids, types, mask (INT32 [B,S], converted from INT64 on the host)
 *     -> embeddingLayerNorm (one fused kernel on CUDA)                        h [B·S,H]
 *     -> L encoder layers, attention(qkv, mask) over each row's S tokens      h [B·S,H]
 *     -> last_hidden_state [B,S,H], pooler_output, embedding [B,H], logits [B,C]
 * </pre>
 * The op sequence is {@link BertEncoderPlan}'s, shared with the packed forward of a batch of requests
 * ({@link PackedBertForward}); this class supplies its padded layout ({@code PaddedTokens}). The steps and their
 * tensors form an {@link ExecutionPlan} built once at load; each intermediate is released right after its last
 * reader, or, with a request arena ({@link LoadTarget#requestArena}), lives at its packed offset in one block per
 * forward. Batches of requests run through {@link BertBatching}.
 *
 * <p>Activations take {@link TensorOps#activationBytes()} bytes per element (2 where the kernels hold them in
 * bf16); the linear weights and biases are then uploaded as bf16 too, and each output a request asks for is widened
 * to FP32 (one {@link TensorOps#toFloat32} step per output) before the download.
 */
public final class BertModel implements BatchableModel, PlannedMemory {

    public static final String PLATFORM = "gpupool_bert";
    public static final String INPUT_IDS = "input_ids";
    public static final String ATTENTION_MASK = "attention_mask";
    public static final String TOKEN_TYPE_IDS = "token_type_ids";
    public static final String LAST_HIDDEN_STATE = "last_hidden_state";
    public static final String POOLER_OUTPUT = "pooler_output";
    public static final String EMBEDDING = "embedding";
    public static final String LOGITS = "logits";

    private final ModelConfig config;
    private final ModelConfig.Bert arch;
    private final DeviceWeights weights;
    private final List<TensorSpec> inputs;
    private final List<TensorSpec> outputs;
    private final ExecutionPlan plan;
    private final int maskTensor;
    private final int typesTensor;
    /** Device tensor id of each output name. */
    private final Map<String, Integer> outputTensors;
    private final int numLabels;
    /** Batches of requests (dynamic batching): packed where the kernels allow, else padded. */
    private final BertBatching batching;
    private final BertPadding padding;
    /** A request's inputs, checked and converted to INT32 (alone and in a batch alike). */
    private final BertInputs inputChecks;
    private volatile boolean closed;

    /** Forwards run in one arena per request (LoadTarget#requestArena), the padded and the packed plan alike. */
    private final boolean requestArena;

    private BertModel(ModelConfig config, DeviceWeights weights, String prefix, boolean pooler, int numLabels,
                      TensorOps planningOps, boolean requestArena) {
        this.config = config;
        this.requestArena = requestArena;
        this.arch = (ModelConfig.Bert) config.architecture();
        this.weights = weights;
        this.numLabels = numLabels;
        int h = arch.hiddenSize();
        List<TensorSpec> allInputs = List.of(
                new TensorSpec(INPUT_IDS, DataType.INT64, new long[]{-1, -1}),
                new TensorSpec(ATTENTION_MASK, DataType.INT64, new long[]{-1, -1}),
                new TensorSpec(TOKEN_TYPE_IDS, DataType.INT64, new long[]{-1, -1}));
        List<TensorSpec> allOutputs = new ArrayList<>();
        allOutputs.add(new TensorSpec(LAST_HIDDEN_STATE, DataType.FP32, new long[]{-1, -1, h}));
        if (pooler) {
            allOutputs.add(new TensorSpec(POOLER_OUTPUT, DataType.FP32, new long[]{-1, h}));
        }
        allOutputs.add(new TensorSpec(EMBEDDING, DataType.FP32, new long[]{-1, h}));
        if (numLabels > 0) {
            allOutputs.add(new TensorSpec(LOGITS, DataType.FP32, new long[]{-1, numLabels}));
        }
        this.inputs = select(config, "inputs", allInputs, config.serving().inputs());
        if (inputs.stream().noneMatch(s -> s.name().equals(INPUT_IDS))) {
            throw new ModelFormatException("model '" + config.name() + "': gpupool.inputs must include " + INPUT_IDS);
        }
        this.outputs = select(config, "outputs", allOutputs, config.serving().outputs());
        this.padding = new BertPadding(inputs.stream().anyMatch(s -> s.name().equals(ATTENTION_MASK)),
                inputs.stream().anyMatch(s -> s.name().equals(TOKEN_TYPE_IDS)));

        BertEncoderPlan.Built built = BertEncoderPlan.build(new PaddedTokens(arch, planningOps), this, prefix, pooler,
                planningOps.activationBytes(), requestArena);
        this.plan = built.plan();
        this.maskTensor = built.inputs().mask();
        this.typesTensor = built.inputs().types();
        this.outputTensors = built.outputTensors();
        this.inputChecks = new BertInputs(this, arch);
        this.batching = new BertBatching(this, prefix, pooler, planningOps);
    }

    private static List<TensorSpec> select(ModelConfig config, String field, List<TensorSpec> all, List<String> names) {
        if (names.isEmpty()) {
            return List.copyOf(all);
        }
        List<TensorSpec> selected = new ArrayList<>();
        for (String name : names) {
            TensorSpec spec = all.stream().filter(s -> s.name().equals(name)).findFirst().orElseThrow(() ->
                    new ModelFormatException("model '" + config.name() + "': gpupool." + field + " names '" + name
                            + "', expected some of " + all.stream().map(TensorSpec::name).toList()));
            selected.add(spec);
        }
        return List.copyOf(selected);
    }

    /**
     * Checks {@code file} against {@code config} (every expected tensor present with the shape the
     * config implies, nothing unexpected: {@link BertCheckpoint}), uploads the weights to {@code target} and builds
     * the plan. On any failure nothing stays allocated.
     */
    public static BertModel load(ModelConfig config, SafetensorsFile file, LoadTarget target) {
        if (!(config.architecture() instanceof ModelConfig.Bert arch)) {
            throw new IllegalArgumentException("model '" + config.name() + "' is not a BERT model");
        }
        BertCheckpoint checkpoint = BertCheckpoint.check(config, arch, file);
        DeviceWeights weights = new DeviceWeights(target.stream(), target.weightAllocator());
        try {
            checkpoint.upload(weights, file, arch.numHiddenLayers(), target.ops().activationBytes() == 2);
            return new BertModel(config, weights, checkpoint.prefix(), checkpoint.pooler(), checkpoint.numLabels(),
                    target.ops(), target.requestArena());
        } catch (RuntimeException | Error e) {
            try {
                weights.close();
            } catch (RuntimeException closeFailure) {
                e.addSuppressed(closeFailure);
            }
            throw e;
        }
    }

    // ---- serving ------------------------------------------------------------------------------

    /** Host-side state of one request, read by the upload and download steps. */
    private record Request(MemorySegment ids, MemorySegment mask, MemorySegment types,
                           Map<Integer, MemorySegment> outputs) implements BertEncoderPlan.State {
    }

    @Override
    public List<HostTensor> infer(List<HostTensor> requestInputs, Set<String> requestedOutputs, ExecutionContext context) {
        if (closed) {
            throw new IllegalStateException("model '" + name() + "' is closed");
        }
        long[] shape = inputChecks.shape(requestInputs);
        List<TensorSpec> selected = selectOutputs(requestedOutputs);
        try (Arena staging = Arena.ofShared()) {
            BertInputs.Tokens tokens = inputChecks.convert(staging, requestInputs, shape);
            return forward(tokens.batch(), tokens.seq(), tokens.ids(), tokens.mask(), tokens.types(), selected,
                    context);
        }
    }

    /**
     * One forward of {@code batch} sequences of {@code seq} tokens whose INT32 inputs are already checked (ids and
     * types within their vocabularies, mask 0 or 1: {@link BertInputs}): {@link #infer} after its checks, and the
     * padded batch, which checked each member when it was prepared.
     *
     * @param ids   batch × seq INT32, row-major, on the heap or native; read by the stream until it is synchronised
     * @param mask  the same shape, or null: every token real
     * @param types the same shape, or null: every token of type 0
     * @return the selected outputs, in automatic arenas: they outlive the call and the stream lease
     */
    List<HostTensor> forward(int batch, int seq, MemorySegment ids, MemorySegment mask, MemorySegment types,
                             List<TensorSpec> selected, ExecutionContext context) {
        Arena results = Arena.ofAuto();
        Map<Integer, MemorySegment> hostOutputs = new LinkedHashMap<>();
        List<HostTensor> result = new ArrayList<>();
        for (TensorSpec spec : selected) {
            long[] outShape = concrete(spec.shape(), batch, seq);
            MemorySegment data = results.allocate(HostTensor.elementCount(outShape) * Float.BYTES, 64);
            hostOutputs.put(outputTensors.get(spec.name()), data);
            result.add(new HostTensor(spec.name(), DataType.FP32, outShape, data));
        }
        boolean[] absent = new boolean[plan.tensorCount()];
        absent[maskTensor] = mask == null;
        absent[typesTensor] = types == null;
        plan.run(context, batch, seq, absent, new Request(ids, mask, types, hostOutputs));
        return result;
    }

    List<TensorSpec> selectOutputs(Set<String> requested) {
        if (requested == null || requested.isEmpty()) {
            return outputs;
        }
        List<TensorSpec> selected = new ArrayList<>();
        for (String name : requested) {
            if (outputs.stream().noneMatch(s -> s.name().equals(name))) {
                throw new IllegalArgumentException("model '" + name() + "' has no output '" + name + "', expected some of "
                        + outputs.stream().map(TensorSpec::name).toList());
            }
        }
        for (TensorSpec spec : outputs) {
            if (requested.contains(spec.name())) {
                selected.add(spec);
            }
        }
        return selected;
    }

    static long[] concrete(long[] specShape, int batch, int seq) {
        long[] shape = specShape.clone();
        shape[0] = batch;
        if (shape.length == 3) {
            shape[1] = seq;
        }
        return shape;
    }

    // ---- batching (BertBatching), and what it reads of this model ------------------------------

    @Override
    public Member prepare(List<HostTensor> requestInputs, Set<String> requestedOutputs) {
        if (closed) {
            throw new IllegalStateException("model '" + name() + "' is closed");
        }
        return batching.prepare(requestInputs, requestedOutputs);
    }

    @Override
    public long batchPeakBytes(List<? extends Member> members) {
        return batching.peakBytes(members, ExecutionPlan.ALIGNED);
    }

    @Override
    public long batchPeakBytes(List<? extends Member> members, java.util.function.LongUnaryOperator blockBytes) {
        return batching.peakBytes(members, blockBytes);
    }

    @Override
    public boolean fitsOneForward(List<? extends Member> members) {
        return batching.fitsOneForward(members);
    }

    @Override
    public List<List<HostTensor>> inferBatch(List<? extends Member> members, ExecutionContext context) {
        if (closed) {
            throw new IllegalStateException("model '" + name() + "' is closed");
        }
        return batching.run(members, context);
    }

    @Override
    public String batchLayout() {
        return batching.layout();
    }

    /** Packed batches run at a graph's bucket ({@link PackedPadding}); empty with the padded layout. */
    @Override
    public Optional<io.gpupool.model.BatchPadding> batchPadding() {
        return batching.padding();
    }

    /** Padded-layout batches run at a graph's request bucket ({@link PaddedLayoutPadding}); empty when packed. */
    @Override
    public Optional<io.gpupool.model.PaddedBatchPadding> paddedBatchPadding() {
        return batching.paddedLayoutPadding();
    }

    @Override
    public ModelConfig.Batching batching() {
        return config.serving().batching();
    }

    ModelConfig.Bert arch() {
        return arch;
    }

    BertInputs inputChecks() {
        return inputChecks;
    }

    DeviceWeights weights() {
        return weights;
    }

    int numLabels() {
        return numLabels;
    }

    boolean requestArena() {
        return requestArena;
    }

    /** Bytes of activations one request of this shape holds at its peak (see {@link ExecutionPlan#peakBytes}). */
    @Override
    public long peakActivationBytes(int batch, int seq) {
        return plan.peakBytes(batch, seq);
    }

    @Override
    public long peakActivationBytes(int batch, int seq, java.util.function.LongUnaryOperator blockBytes) {
        return plan.peakBytes(batch, seq, blockBytes);
    }

    /** The largest single activation a request of this shape allocates. */
    @Override
    public long largestActivationBytes(int batch, int seq) {
        return plan.largestAllocationBytes(batch, seq);
    }

    /** Runs padded to a shape bucket with the padding masked (see {@link BertPadding}), when the mask is an input. */
    @Override
    public Optional<ShapePadding> padding() {
        return Optional.of(padding);
    }

    /** Bytes the weights take on the device. */
    public long weightBytes() {
        return weights.totalBytes();
    }

    public ModelConfig config() {
        return config;
    }

    /** Built on first use from the config; a race builds an equal, immutable signature twice. */
    private io.gpupool.model.ModelSignature signature;

    @Override
    public io.gpupool.model.ModelSignature signature() {
        io.gpupool.model.ModelSignature known = signature;
        if (known == null) {
            known = io.gpupool.model.ModelSignature.of(config, PLATFORM, inputs, outputs, config.serving().maxSequenceLength());
            signature = known;
        }
        return known;
    }

    @Override
    public synchronized void close() {
        if (!closed) {
            closed = true;
            weights.close();
        }
    }
}
