package io.gpupool.model.mlp;

import io.gpupool.kernels.TensorOps.Activation;
import io.gpupool.model.BatchableModel;
import io.gpupool.model.DataType;
import io.gpupool.model.DeviceWeights;
import io.gpupool.model.ExecutionContext;
import io.gpupool.model.HostTensor;
import io.gpupool.model.LoadTarget;
import io.gpupool.model.ModelConfig;
import io.gpupool.model.ModelFormatException;
import io.gpupool.model.ModelSignature;
import io.gpupool.model.PlannedMemory;
import io.gpupool.model.TensorSpec;
import io.gpupool.model.plan.ExecutionPlan;
import io.gpupool.model.safetensors.SafetensorsFile;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;

import static io.gpupool.model.plan.ExecutionPlan.ids;

/**
 * A multi-layer perceptron for tabular data.
 *
 * <pre>
 *   input [B,F] FP32
 *     -> x1 = act0(input · W0ᵀ + b0)      W0 = layers.0.weight [U0,F], b0 = layers.0.bias [U0]
 *     -> x2 = act1(x1 · W1ᵀ + b1)         ...
 *     -> softmax (if output_softmax)      probabilities [B,C]   (named "scores" without softmax)
 *   label [B] INT64 = argmax over C, computed on the host from the downloaded output
 * </pre>
 * Index {@code i} of {@code label} names {@link #classLabels()}{@code .get(i)} when the config lists
 * labels. Intermediates follow an {@link ExecutionPlan} like every model. A batch of requests
 * ({@link BatchableModel}) is their rows concatenated: rows never interact, so each request's slice of the
 * batched outputs is what it gets alone; a request alone is a batch of one.
 */
public final class MlpModel implements BatchableModel, PlannedMemory {

    public static final String PLATFORM = "gpupool_mlp";
    public static final String INPUT = "input";
    public static final String PROBABILITIES = "probabilities";
    public static final String SCORES = "scores";
    public static final String LABEL = "label";

    private final ModelConfig config;
    private final ModelConfig.Mlp arch;
    private final DeviceWeights weights;
    private final List<TensorSpec> inputs;
    private final List<TensorSpec> outputs;
    private final String scoreName;
    private final ExecutionPlan plan;
    private final ModelSignature signature;
    private volatile boolean closed;

    private record Request(MemorySegment input, MemorySegment scores) {
    }

    /** @param requestArena each forward in one arena (LoadTarget#requestArena) */
    private MlpModel(ModelConfig config, DeviceWeights weights, boolean requestArena) {
        this.config = config;
        this.arch = (ModelConfig.Mlp) config.architecture();
        this.weights = weights;
        int classes = arch.outputs();
        this.scoreName = arch.outputSoftmax() ? PROBABILITIES : SCORES;
        List<TensorSpec> allOutputs = List.of(
                new TensorSpec(scoreName, DataType.FP32, new long[]{-1, classes}),
                new TensorSpec(LABEL, DataType.INT64, new long[]{-1}));
        TensorSpec input = new TensorSpec(INPUT, DataType.FP32, new long[]{-1, arch.inputFeatures()});
        List<String> declaredInputs = config.serving().inputs();
        if (!declaredInputs.isEmpty() && !declaredInputs.equals(List.of(INPUT))) {
            throw new ModelFormatException("model '" + config.name() + "': gpupool.inputs = " + declaredInputs
                    + ", expected [" + INPUT + "]");
        }
        this.inputs = List.of(input);
        List<TensorSpec> selected = new ArrayList<>();
        for (String name : config.serving().outputs()) {
            selected.add(allOutputs.stream().filter(s -> s.name().equals(name)).findFirst().orElseThrow(() ->
                    new ModelFormatException("model '" + config.name() + "': gpupool.outputs names '" + name
                            + "', expected some of " + allOutputs.stream().map(TensorSpec::name).toList())));
        }
        this.outputs = selected.isEmpty() ? allOutputs : List.copyOf(selected);
        ModelSignature declared = ModelSignature.of(config, PLATFORM, inputs, outputs, 0);
        this.signature = arch.classLabels().isEmpty() ? declared : declared.withClassLabels(scoreName, arch.classLabels());

        ExecutionPlan.Builder b = ExecutionPlan.builder().requestArena(requestArena);
        int in = b.tensor(INPUT, (bs, s) -> (long) bs * arch.inputFeatures() * Float.BYTES);
        b.step("upload input", ids(), ids(in), inv -> {
            Request r = inv.state();
            inv.context().stream().copyHostToDevice(r.input, inv.address(in), r.input.byteSize());
        });
        int x = in;
        int width = arch.inputFeatures();
        for (int i = 0; i < arch.layers().size(); i++) {
            ModelConfig.MlpLayer layer = arch.layers().get(i);
            long w = weights.address("layers." + i + ".weight");
            long bias = weights.address("layers." + i + ".bias");
            int from = x;
            int fromWidth = width;
            int units = layer.units();
            Activation act = layer.activation();
            int y = b.tensor("layers." + i, (bs, s) -> (long) bs * units * Float.BYTES);
            // FP32 activations whatever the device's kernels hold (this model's tensors are sized for floats)
            b.step("layers." + i, ids(from), ids(y), inv -> inv.context().ops().fp32Activations().linear(
                    inv.context().stream(), inv.address(from), w, bias, inv.address(y), inv.batch(), fromWidth, units,
                    act));
            x = y;
            width = units;
        }
        int last = x;
        if (arch.outputSoftmax()) {
            b.step("softmax", ids(last), ids(last), inv -> inv.context().ops().fp32Activations().softmax(
                    inv.context().stream(), inv.address(last), inv.address(last), inv.batch(), classes));
        }
        b.step("download", ids(last), ids(), inv -> {
            Request r = inv.state();
            inv.context().stream().copyDeviceToHost(inv.address(last), r.scores, r.scores.byteSize());
        });
        this.plan = b.build();
    }

    /** Checks {@code file} against the config and uploads the weights; nothing stays allocated on failure. */
    public static MlpModel load(ModelConfig config, SafetensorsFile file, LoadTarget target) {
        if (!(config.architecture() instanceof ModelConfig.Mlp arch)) {
            throw new IllegalArgumentException("model '" + config.name() + "' is not an MLP");
        }
        Map<String, long[]> expected = new LinkedHashMap<>();
        int width = arch.inputFeatures();
        for (int i = 0; i < arch.layers().size(); i++) {
            int units = arch.layers().get(i).units();
            expected.put("layers." + i + ".weight", new long[]{units, width});
            expected.put("layers." + i + ".bias", new long[]{units});
            width = units;
        }
        Set<String> missing = new TreeSet<>(expected.keySet());
        missing.removeAll(file.tensors().keySet());
        if (!missing.isEmpty()) {
            throw new ModelFormatException(file.path() + ": missing tensor(s) " + missing + " that mlp.layers of model '"
                    + config.name() + "' needs");
        }
        Set<String> extra = new TreeSet<>(file.tensors().keySet());
        extra.removeAll(expected.keySet());
        if (!extra.isEmpty()) {
            throw new ModelFormatException(file.path() + ": tensor(s) " + extra + " that mlp.layers of model '"
                    + config.name() + "' does not account for");
        }
        for (Map.Entry<String, long[]> e : expected.entrySet()) {
            long[] shape = file.info(e.getKey()).shape();
            if (!Arrays.equals(shape, e.getValue())) {
                throw new ModelFormatException(file.path() + ": tensor '" + e.getKey() + "' has shape "
                        + Arrays.toString(shape) + " but mlp.layers implies " + Arrays.toString(e.getValue()));
            }
            if (!file.info(e.getKey()).dtype().isFloatingPoint()) {
                throw new ModelFormatException(file.path() + ": tensor '" + e.getKey() + "' is "
                        + file.info(e.getKey()).dtype() + ", expected F32, F16, BF16 or F64");
            }
        }
        DeviceWeights weights = new DeviceWeights(target.stream(), target.weightAllocator());
        try {
            for (String name : expected.keySet()) {
                weights.upload(name, file, name);
            }
            weights.finish();
            return new MlpModel(config, weights, target.requestArena());
        } catch (RuntimeException | Error e) {
            try {
                weights.close();
            } catch (RuntimeException closeFailure) {
                e.addSuppressed(closeFailure);
            }
            throw e;
        }
    }

    /** One validated request: its input rows (the request's own data) and the outputs it selected. */
    private record Rows(MemorySegment input, int rows, Set<String> wanted) implements Member {

        @Override
        public int tokens() {
            return rows;
        }

        @Override
        public int sequenceLength() {
            return 0;
        }
    }

    @Override
    public List<HostTensor> infer(List<HostTensor> requestInputs, Set<String> requestedOutputs, ExecutionContext context) {
        return inferBatch(List.of(prepare(requestInputs, requestedOutputs)), context).getFirst();
    }

    @Override
    public Member prepare(List<HostTensor> requestInputs, Set<String> requestedOutputs) {
        if (closed) {
            throw new IllegalStateException("model '" + name() + "' is closed");
        }
        HostTensor input = requestInputs.stream().filter(t -> t.name().equals(INPUT)).findFirst().orElseThrow(() ->
                new IllegalArgumentException("model '" + name() + "': input '" + INPUT + "' is required"));
        long[] shape = input.shape();
        if (input.dataType() != DataType.FP32 || shape.length != 2 || shape[1] != arch.inputFeatures()
                || shape[0] < 1 || shape[0] > maxBatchSize()) {
            throw new IllegalArgumentException("model '" + name() + "': input is " + input.dataType()
                    + Arrays.toString(shape) + ", expected FP32[1.." + maxBatchSize() + ", " + arch.inputFeatures() + "]");
        }
        Set<String> wanted = requestedOutputs == null || requestedOutputs.isEmpty()
                ? outputs.stream().map(TensorSpec::name).collect(java.util.stream.Collectors.toSet()) : requestedOutputs;
        for (String name : wanted) {
            if (outputs.stream().noneMatch(s -> s.name().equals(name))) {
                throw new IllegalArgumentException("model '" + name() + "' has no output '" + name + "', expected some of "
                        + outputs.stream().map(TensorSpec::name).toList());
            }
        }
        return new Rows(input.data(), (int) shape[0], Set.copyOf(wanted));
    }

    /** Rows of all members concatenated: [Σ rows, features] through every layer, one plan run. */
    @Override
    public long batchPeakBytes(List<? extends Member> members) {
        return plan.peakBytes(totalRows(members), 0);
    }

    @Override
    public long batchPeakBytes(List<? extends Member> members, java.util.function.LongUnaryOperator blockBytes) {
        return plan.peakBytes(totalRows(members), 0, blockBytes);
    }

    @Override
    public List<List<HostTensor>> inferBatch(List<? extends Member> members, ExecutionContext context) {
        if (closed) {
            throw new IllegalStateException("model '" + name() + "' is closed");
        }
        int batch = totalRows(members);
        int classes = arch.outputs();
        long rowBytes = (long) arch.inputFeatures() * Float.BYTES;
        Arena results = Arena.ofAuto();
        MemorySegment scores = results.allocate((long) batch * classes * Float.BYTES, 64);
        try (Arena staging = Arena.ofShared()) {
            MemorySegment host = staging.allocate(batch * rowBytes, 64);
            long offset = 0;
            for (Member member : members) {
                Rows rows = (Rows) member;
                MemorySegment.copy(rows.input(), 0, host, offset, rows.rows() * rowBytes);
                offset += rows.rows() * rowBytes;
            }
            plan.run(context, batch, 0, null, new Request(host, scores));
        }
        List<List<HostTensor>> perMember = new ArrayList<>(members.size());
        long firstRow = 0;
        for (Member member : members) {
            Rows rows = (Rows) member;
            MemorySegment own = scores.asSlice(firstRow * classes * Float.BYTES, (long) rows.rows() * classes * Float.BYTES);
            perMember.add(outputs(own, rows.rows(), rows.wanted(), results));
            firstRow += rows.rows();
        }
        return perMember;
    }

    private List<HostTensor> outputs(MemorySegment scores, int batch, Set<String> wanted, Arena results) {
        int classes = arch.outputs();
        List<HostTensor> result = new ArrayList<>();
        for (TensorSpec spec : outputs) {
            if (!wanted.contains(spec.name())) {
                continue;
            }
            if (spec.name().equals(LABEL)) {
                MemorySegment labels = results.allocate((long) batch * Long.BYTES, 64);
                for (int r = 0; r < batch; r++) {
                    int best = 0;
                    for (int c = 1; c < classes; c++) {
                        if (scores.getAtIndex(ValueLayout.JAVA_FLOAT, (long) r * classes + c)
                                > scores.getAtIndex(ValueLayout.JAVA_FLOAT, (long) r * classes + best)) {
                            best = c;
                        }
                    }
                    labels.setAtIndex(ValueLayout.JAVA_LONG, r, best);
                }
                result.add(new HostTensor(LABEL, DataType.INT64, new long[]{batch}, labels));
            } else {
                result.add(new HostTensor(scoreName, DataType.FP32, new long[]{batch, classes}, scores));
            }
        }
        return result;
    }

    private static int totalRows(List<? extends Member> members) {
        int rows = 0;
        for (Member member : members) {
            rows = Math.addExact(rows, member.rows());
        }
        return rows;
    }

    @Override
    public String batchLayout() {
        return "packed";
    }

    @Override
    public ModelConfig.Batching batching() {
        return config.serving().batching();
    }

    /** Names of the classes, index-aligned with the score columns and the label values (may be empty). */
    public List<String> classLabels() {
        return arch.classLabels();
    }

    /** Bytes of activations one request of {@code batch} rows holds at its peak ({@code seq} is ignored). */
    @Override
    public long peakActivationBytes(int batch, int seq) {
        return plan.peakBytes(batch, 0);
    }

    @Override
    public long peakActivationBytes(int batch, int seq, java.util.function.LongUnaryOperator blockBytes) {
        return plan.peakBytes(batch, 0, blockBytes);
    }

    @Override
    public long largestActivationBytes(int batch, int seq) {
        return plan.largestAllocationBytes(batch, 0);
    }

    public long weightBytes() {
        return weights.totalBytes();
    }

    public ModelConfig config() {
        return config;
    }

    @Override
    public ModelSignature signature() {
        return signature;
    }

    @Override
    public synchronized void close() {
        if (!closed) {
            closed = true;
            weights.close();
        }
    }
}
