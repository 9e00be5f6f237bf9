package io.gpupool.lab;

import io.gpupool.backend.ComputeBackend;
import io.gpupool.backend.ComputeDevice;
import io.gpupool.backend.DeviceStream;
import io.gpupool.backend.cuda.CudaBackend;
import io.gpupool.backend.host.HostBackend;
import io.gpupool.kernels.TensorOps;
import io.gpupool.kernels.cuda.CudaTensorOps;
import io.gpupool.kernels.cuda.KernelOptions;
import io.gpupool.kernels.cuda.GemmEngine;
import io.gpupool.kernels.cuda.Precision;
import io.gpupool.backend.MatmulLibrary;
import io.gpupool.kernels.host.HostTensorOps;
import io.gpupool.memory.metric.AllocatorMode;
import io.gpupool.memory.DeviceAllocator;
import io.gpupool.memory.pool.DevicePool;
import io.gpupool.memory.PoolConfig;
import io.gpupool.model.DataType;
import io.gpupool.model.ExecutionContext;
import io.gpupool.model.HostTensor;
import io.gpupool.model.InferenceModel;
import io.gpupool.model.LoadTarget;
import io.gpupool.model.repository.ModelRepository;
import io.gpupool.model.TensorSpec;
import io.gpupool.model.bert.BertModel;
import io.gpupool.model.graph.DeviceGraphs;
import io.gpupool.model.graph.GraphCacheMetrics;
import io.gpupool.model.graph.GraphLimits;
import io.gpupool.model.graph.ShapeBuckets;
import io.gpupool.model.safetensors.SafetensorsFile;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.TreeMap;

/**
 * Times our BERT forward through the serving path (backend, {@link DevicePool} activations, {@link CudaTensorOps},
 * {@link BertModel#infer}) for each kernel precision and each batch × sequence, and writes JSON for
 * {@code tools/bert-vs-torch.sh} to set against PyTorch eager on the same weights.
 *
 * <h2>What is timed</h2>
 * Wall-clock time of one {@code infer} call (it returns after the stream is synchronised), median of the repetitions
 * after warm-up, in two modes:
 * <pre>
 *   forward   infer asking only for "embedding" (else pooler_output): every layer runs, the download is B×H floats;
 *             the closest to what torch's benchmark times (last_hidden_state left on the device)
 *   full      infer asking for last_hidden_state: adds the B×S×H float download through pinned staging
 * </pre>
 * Inputs: random ids, an all-ones attention mask and zero token types, INT64 as a client would send them (the
 * INT64 → INT32 conversion and the upload are part of both modes).
 *
 * <h2>Variants</h2>
 * {@code --variants} adds columns beside the eager forward, each timed in the "forward" mode and marked in its
 * row's {@code variant}:
 * <pre>
 *   eager         the model's forward as the server runs it with graphs off (both modes)
 *   tuned         the same model through CudaTensorOps with gpupool.kernels.gemm-tuning on: each product shape
 *                 measured on its first run (the warm-up), the fastest algorithm or own kernel kept
 *   graphs        the server's CUDA graphs (DeviceGraphs, GraphedModel, ShapeBuckets) over the eager ops: the first
 *                 run of a shape schedules its capture, the bench waits for it, then times the replays; the
 *                 buckets are the bench's own batches and sequences, so every cell has its exact graph (as
 *                 torch.compile(mode="reduce-overhead", dynamic=False) has one per shape)
 *   tuned-graphs  graphs over the tuned ops
 * </pre>
 * A graph row says whether its graph was captured and how many replays its timing ran; the measured GEMM choices
 * of each precision go to {@code gemm_choices}.
 *
 * <h2>Also recorded</h2>
 * <ol>
 *   <li>accuracy: with {@code reference.safetensors} in the model folder (tools/make_bert_base.py writes one), the
 *       max abs difference of last_hidden_state from transformers' FP32 output, per precision;</li>
 *   <li>profile (a few shapes): one forward with a {@link TimingOps} wrapper that synchronises after every
 *       op (device time per op kind) and one that does not (host time spent enqueueing), plus the time between ops
 *       (plan steps, pool allocations);</li>
 *   <li>the activation pool's peak and reserved bytes.</li>
 * </ol>
 * The JSON is rewritten after every shape, so a run cut short still leaves its results. A time budget
 * ({@code --budget-s}) skips what would not fit, and each shape's repetitions stop at {@code --shape-s}.
 *
 * <pre>
 *   BertGpuBench --model DIR --out FILE [--backend cuda|host] [--precisions FP32,BF16,TF32,TF32X3]
 *                [--batches 1,8,32] [--seqs 16,128,512] [--warmup 3] [--reps 10]
 *                [--budget-s 150] [--shape-s 4] [--profile 1x128,32x512|none]
 *                [--engine AUTO|CUBLASLT|OWN] [--cublaslt-dir DIR]
 *                [--kernel-options default|none|residual-in-gemm,warp-layer-norm,gemm-tuning]
 *                [--variants eager,tuned,graphs,tuned-graphs] [--jit-warmup 50]
 * </pre>
 * Before each precision's first shape, {@code --jit-warmup} forwards at the smallest shape let the JIT compile the
 * forward's host code (a few warm-up runs per shape do not, and batch-1 cells are enqueue-bound).
 * Each precision loads the model with its own {@link CudaTensorOps} (on cuBLASLt unless {@code --engine OWN} or the
 * library is absent; BF16 on cuBLASLt stores weights and activations in bf16); every row names its GEMM engine and
 * activation type. The profile's {@code launches} counts kernel launches plus library calls of one forward.
 */
public final class BertGpuBench {

    private BertGpuBench() {
    }

    record Options(Path model, Path out, String backend, List<String> precisions, int[] batches, int[] seqs,
                   int warmup, int reps, double budgetSeconds, double shapeSeconds, List<int[]> profile,
                   GemmEngine engine, Path cublasLtDir, KernelOptions kernelOptions, List<String> variants,
                   int jitWarmup) {
    }

    /** The variants of the class comment, in the order their columns print. */
    static final List<String> VARIANTS = List.of("eager", "tuned", "graphs", "tuned-graphs");

    public static void main(String[] args) throws Exception {
        Options options = parse(args);
        int status = run(options);
        System.exit(status);
    }

    static Options parse(String[] args) {
        Map<String, String> values = new LinkedHashMap<>();
        values.put("--backend", "cuda");
        values.put("--precisions", "FP32,BF16,TF32,TF32X3");
        values.put("--batches", "1,8,32");
        values.put("--seqs", "16,128,512");
        values.put("--warmup", "3");
        values.put("--reps", "10");
        values.put("--budget-s", "150");
        values.put("--shape-s", "4");
        values.put("--profile", "1x128,8x128,32x512");
        values.put("--engine", "AUTO");
        values.put("--kernel-options", "default");
        values.put("--variants", "eager");
        values.put("--jit-warmup", "50");
        for (int i = 0; i < args.length; i++) {
            String key = args[i];
            if (!key.startsWith("--") || i + 1 >= args.length) {
                throw new IllegalArgumentException("expected --option value pairs, got '" + key + "'");
            }
            values.put(key, args[++i]);
        }
        for (String required : List.of("--model", "--out")) {
            if (!values.containsKey(required)) {
                throw new IllegalArgumentException(required + " is required");
            }
        }
        String backend = values.get("--backend");
        if (!backend.equals("cuda") && !backend.equals("host")) {
            throw new IllegalArgumentException("--backend must be cuda or host, got " + backend);
        }
        List<String> precisions = new ArrayList<>();
        for (String p : values.get("--precisions").split(",")) {
            precisions.add(p.trim().toUpperCase(Locale.ROOT));   // resolved in run: an unknown one is an error there
        }
        List<int[]> profile = new ArrayList<>();
        if (!values.get("--profile").equals("none")) {
            for (String shape : values.get("--profile").split(",")) {
                String[] bs = shape.split("x");
                profile.add(new int[]{Integer.parseInt(bs[0]), Integer.parseInt(bs[1])});
            }
        }
        return new Options(Path.of(values.get("--model")), Path.of(values.get("--out")), backend,
                List.copyOf(precisions), ints(values.get("--batches")), ints(values.get("--seqs")),
                Integer.parseInt(values.get("--warmup")), Integer.parseInt(values.get("--reps")),
                Double.parseDouble(values.get("--budget-s")), Double.parseDouble(values.get("--shape-s")),
                List.copyOf(profile), GemmEngine.valueOf(values.get("--engine").toUpperCase(Locale.ROOT)),
                values.containsKey("--cublaslt-dir") ? Path.of(values.get("--cublaslt-dir")) : null,
                kernelOptions(values.get("--kernel-options")), variants(values.get("--variants")),
                Integer.parseInt(values.get("--jit-warmup")));
    }

    /** The variants named (eager always first, since the others are set against it). */
    static List<String> variants(String csv) {
        List<String> named = new ArrayList<>(List.of("eager"));
        for (String name : csv.split(",")) {
            String v = name.trim().toLowerCase(Locale.ROOT);
            if (!VARIANTS.contains(v)) {
                throw new IllegalArgumentException("--variants: unknown '" + name + "'; allowed: " + VARIANTS);
            }
            if (!named.contains(v)) {
                named.add(v);
            }
        }
        return List.copyOf(named);
    }

    /**
     * "default" (the server's defaults), "none" (all off) or a comma list of those on: residual-in-gemm,
     * warp-layer-norm, gemm-tuning (the gpupool.kernels.* switches of the same names).
     */
    static KernelOptions kernelOptions(String csv) {
        if (csv.trim().equals("default")) {
            return KernelOptions.DEFAULT;
        }
        boolean residual = false;
        boolean warp = false;
        boolean tuning = false;
        for (String name : csv.split(",")) {
            switch (name.trim()) {
                case "none", "" -> { }
                case "residual-in-gemm" -> residual = true;
                case "warp-layer-norm" -> warp = true;
                case "gemm-tuning" -> tuning = true;
                default -> throw new IllegalArgumentException("--kernel-options: unknown '" + name
                        + "'; allowed: default, none, residual-in-gemm, warp-layer-norm, gemm-tuning");
            }
        }
        return new KernelOptions(false, residual, warp, tuning);
    }

    private static int[] ints(String csv) {
        return Arrays.stream(csv.split(",")).map(String::trim).mapToInt(Integer::parseInt).toArray();
    }

    /** Runs the benchmark; 0 when every planned measurement ran, 2 when the budget cut some, 1 when one failed. */
    static int run(Options o) throws IOException {
        long started = System.nanoTime();
        Map<String, Object> doc = new LinkedHashMap<>();
        List<Map<String, Object>> results = new ArrayList<>();
        List<Map<String, Object>> accuracy = new ArrayList<>();
        List<Map<String, Object>> profiles = new ArrayList<>();
        List<String> skipped = new ArrayList<>();
        List<String> errors = new ArrayList<>();
        doc.put("bench", "gpupool_bert");
        doc.put("status", "running");
        doc.put("java", Runtime.version().toString());
        doc.put("model", o.model().toString());
        doc.put("options", Map.of("warmup", o.warmup(), "reps", o.reps(), "budget_s", o.budgetSeconds(),
                "shape_s", o.shapeSeconds(), "jit_warmup", o.jitWarmup()));
        doc.put("kernel_options", Map.of("residual_in_gemm", o.kernelOptions().residualInGemm(),
                "warp_layer_norm", o.kernelOptions().warpLayerNorm(), "gemm_tuning", o.kernelOptions().tuneGemms()));
        doc.put("variants", o.variants());
        List<Map<String, Object>> gemmChoices = new ArrayList<>();
        doc.put("gemm_choices", gemmChoices);
        doc.put("accuracy", accuracy);
        doc.put("results", results);
        doc.put("profile", profiles);
        doc.put("skipped", skipped);
        doc.put("errors", errors);
        write(o.out(), doc);

        ComputeBackend backend;
        if (o.backend().equals("cuda")) {
            backend = CudaBackend.tryCreate().orElse(null);
            if (backend == null) {
                doc.put("status", "failed: no CUDA driver or device");
                write(o.out(), doc);
                log("no CUDA driver or device");
                return 1;
            }
        } else {
            backend = new HostBackend();
        }
        boolean cuda = o.backend().equals("cuda");
        List<Precision> precisions = precisions(cuda ? o.precisions() : List.of("FP32"), errors);
        try (backend) {
            ComputeDevice device = backend.devices().getFirst();
            device.bindToCurrentThread();
            doc.put("device", device.name());
            DeviceAllocator weights = device.nativeAllocator(AllocatorMode.DIRECT).orElseThrow();
            DevicePool pool = new DevicePool(device.chunkSource(), PoolConfig.defaults());
            DeviceStream stream = device.createStream(0);
            MatmulLibrary library = cuda && o.engine() != GemmEngine.OWN
                    ? device.matmulLibrary(o.cublasLtDir()).orElse(null) : null;
            if (library == null && o.engine() == GemmEngine.CUBLASLT) {
                throw new IllegalStateException("--engine CUBLASLT but cuBLASLt could not be loaded");
            }
            doc.put("gemm_library", library == null ? "none" : library.description());
            boolean wantsGraphs = cuda && o.variants().stream().anyMatch(v -> v.endsWith("graphs"));
            DeviceGraphs graphs = wantsGraphs ? DeviceGraphs.open(device, pool, new GraphLimits(true, 256, 32L << 30),
                    new ShapeBuckets(sorted(o.batches()), sorted(o.seqs())), 1).orElse(null) : null;
            if (wantsGraphs && graphs == null) {
                errors.add("graphs: this device offers no graph capture");
            }
            try {
                for (Precision precision : precisions) {
                    String label = cuda ? precision.name() : "FP32-host";
                    // weights are stored in the ops' activation type, so each precision loads the model anew
                    TensorOps ops = cuda ? new CudaTensorOps(device, precision, library, pool, o.kernelOptions())
                            : new HostTensorOps();
                    // the tuned variants: the same weights through ops that measure each product shape
                    boolean wantsTuned = cuda && library != null
                            && o.variants().stream().anyMatch(v -> v.startsWith("tuned"));
                    CudaTensorOps tunedOps = wantsTuned ? new CudaTensorOps(device, precision, library, pool,
                            withTuning(o.kernelOptions())) : null;
                    try {
                        long loadStart = System.nanoTime();
                        InferenceModel model = ModelRepository.loadModel(o.model().getFileName().toString(), o.model(),
                                new LoadTarget(stream, weights, ops));
                        doc.put("load_s", round((System.nanoTime() - loadStart) / 1e9, 2));
                        log("loaded " + o.model() + " in " + doc.get("load_s") + " s on " + device.name() + " for "
                                + label);
                        InferenceModel served = graphs == null ? model : graphs.wrap(model);
                        try (served) {
                            String small = smallOutput(model);
                            String engine = ops instanceof CudaTensorOps c ? c.gemmEngine() : "host";
                            String activations = ops.activationBytes() == 2 ? "bf16" : "fp32";
                            ExecutionContext context = new ExecutionContext(stream, pool, ops);
                            checkAccuracy(o, model, context, label, accuracy);
                            if (tunedOps != null) {
                                checkAccuracy(o, model, new ExecutionContext(stream, pool, tunedOps), label + " tuned",
                                        accuracy);
                            }
                            write(o.out(), doc);
                            // profiles first: later the pool also holds the graph columns' memory
                            for (int[] bs : o.profile()) {
                                if (bs[0] > model.maxBatchSize() || bs[1] > model.maxSequenceLength()
                                        || elapsed(started) > o.budgetSeconds()) {
                                    continue;
                                }
                                Map<String, Object> profiled = profile(model, stream, pool, ops, label, bs[0], bs[1],
                                        small, vocab(model));
                                if (tunedOps != null) {
                                    profiled.put("launches_tuned", launchesPerForward(model, stream, pool, tunedOps,
                                            bs[0], bs[1], small, vocab(model)));
                                }
                                profiles.add(profiled);
                                write(o.out(), doc);
                            }
                            jitWarmUp(o, model, context, small);
                            for (int batch : o.batches()) {
                                for (int seq : o.seqs()) {
                                    String shape = label + " " + batch + "x" + seq;
                                    if (batch > model.maxBatchSize() || seq > model.maxSequenceLength()) {
                                        skipped.add(shape + ": above the model's maximum " + model.maxBatchSize() + "x"
                                                + model.maxSequenceLength());
                                        continue;
                                    }
                                    if (elapsed(started) > o.budgetSeconds()) {
                                        skipped.add(shape + ": time budget of " + o.budgetSeconds() + " s spent");
                                        continue;
                                    }
                                    List<HostTensor> inputs = inputs(batch, seq, vocab(model), batch * 1000L + seq);
                                    for (String mode : List.of("forward", "full")) {
                                        String output = mode.equals("forward") ? small : BertModel.LAST_HIDDEN_STATE;
                                        Map<String, Object> row = new LinkedHashMap<>();
                                        row.put("bench", "bert_forward");
                                        row.put("precision", label);
                                        row.put("variant", "eager");
                                        row.put("gemm_engine", engine);
                                        row.put("activations", activations);
                                        row.put("mode", mode);
                                        row.put("output", output);
                                        row.put("batch", batch);
                                        row.put("seq", seq);
                                        row.putAll(time(o, model, context, inputs, output));
                                        results.add(row);
                                        log(row.toString());
                                    }
                                    for (String variant : o.variants()) {
                                        if (variant.equals("eager")) {
                                            continue;   // timed above, in both modes
                                        }
                                        if (variant.startsWith("tuned") && tunedOps == null
                                                || variant.endsWith("graphs") && graphs == null) {
                                            skipped.add(shape + " " + variant + ": not available (no library or "
                                                    + "no graphs)");
                                            continue;
                                        }
                                        ExecutionContext variantContext = variant.startsWith("tuned")
                                                ? new ExecutionContext(stream, pool, tunedOps) : context;
                                        Map<String, Object> row = new LinkedHashMap<>();
                                        row.put("bench", "bert_forward");
                                        row.put("precision", label);
                                        row.put("variant", variant);
                                        row.put("gemm_engine", engine);
                                        row.put("activations", activations);
                                        row.put("mode", "forward");
                                        row.put("output", small);
                                        row.put("batch", batch);
                                        row.put("seq", seq);
                                        try {
                                            if (variant.endsWith("graphs")) {
                                                row.putAll(captureFirst(graphs, served, variantContext, inputs, small));
                                                long hits = graphs.metrics().hits();
                                                row.putAll(time(o, served, variantContext, inputs, small));
                                                row.put("replays", graphs.metrics().hits() - hits);
                                            } else {
                                                row.putAll(time(o, model, variantContext, inputs, small));
                                            }
                                        } catch (RuntimeException e) {
                                            // one column failing leaves the others (and the eager one) measured
                                            errors.add(shape + " " + variant + ": " + e);
                                            log("FAILED " + shape + " " + variant + ": " + e);
                                            stream.synchronize();
                                            continue;
                                        }
                                        results.add(row);
                                        log(row.toString());
                                    }
                                    write(o.out(), doc);
                                }
                            }
                            if (tunedOps != null) {
                                for (TensorOps.GemmChoice choice : tunedOps.gemmChoices()) {
                                    Map<String, Object> c = new LinkedHashMap<>();
                                    c.put("precision", label);
                                    c.put("shape", choice.shape());
                                    c.put("engine", choice.engine());
                                    c.put("ms", Double.isNaN(choice.millis()) ? null : round(choice.millis(), 5));
                                    c.put("heuristic_ms", Double.isNaN(choice.heuristicMillis()) ? null
                                            : round(choice.heuristicMillis(), 5));
                                    c.put("candidates", choice.candidates());
                                    gemmChoices.add(c);
                                }
                            }
                            Map<String, Object> poolStats = new LinkedHashMap<>();
                            poolStats.put("peak_allocated_bytes", pool.metrics().peakAllocatedBytes());
                            poolStats.put("reserved_bytes", pool.metrics().reservedBytes());
                            doc.put("pool", poolStats);
                        }
                    } catch (RuntimeException | LinkageError e) {
                        // One precision failing (a kernel that does not load or launch) leaves the others
                        // to run; a device fault that poisons the context fails them too, each recorded.
                        errors.add(label + ": " + e);
                        log("FAILED " + label + ": " + e);
                        write(o.out(), doc);
                    } finally {
                        stream.synchronize();
                        if (ops instanceof CudaTensorOps c) {
                            c.close();
                        }
                        if (tunedOps != null) {
                            tunedOps.close();
                        }
                    }
                }
            } finally {
                if (graphs != null) {
                    GraphCacheMetrics m = graphs.metrics();
                    doc.put("graphs", Map.of("captures", m.captures(), "capture_failures", m.captureFailures(),
                            "replay_failures", m.replayFailures(), "hits", m.hits(), "misses", m.misses()));
                    graphs.close();
                }
                stream.close();
                pool.close();
                weights.close();
            }
            doc.put("status", !errors.isEmpty() ? "errors"
                    : skipped.stream().anyMatch(s -> s.contains("budget")) ? "partial" : "complete");
        } catch (RuntimeException | Error e) {
            doc.put("status", "failed: " + e);
            write(o.out(), doc);
            throw e;
        }
        doc.put("elapsed_s", round(elapsed(started), 1));
        write(o.out(), doc);
        log("done in " + doc.get("elapsed_s") + " s: " + results.size() + " results, " + skipped.size() + " skipped");
        return switch ((String) doc.get("status")) {
            case "complete" -> 0;
            case "partial" -> 2;
            default -> 1;
        };
    }

    /**
     * The precisions named that these kernels have, in order; each unknown name (a bundle older than the script)
     * becomes an entry of {@code errors} instead of stopping the run.
     */
    static List<Precision> precisions(List<String> names, List<String> errors) {
        List<Precision> precisions = new ArrayList<>();
        for (String name : names) {
            try {
                precisions.add(Precision.valueOf(name));
            } catch (IllegalArgumentException e) {
                errors.add(name + ": not a precision of these kernels, expected one of "
                        + Arrays.toString(Precision.values()));
            }
        }
        return precisions;
    }

    /** The cheapest output to download: the pooled embedding, else the pooler output, else the hidden states. */
    private static String smallOutput(InferenceModel model) {
        List<String> names = model.outputs().stream().map(TensorSpec::name).toList();
        for (String name : List.of(BertModel.EMBEDDING, BertModel.POOLER_OUTPUT)) {
            if (names.contains(name)) {
                return name;
            }
        }
        return BertModel.LAST_HIDDEN_STATE;
    }

    private static int vocab(InferenceModel model) {
        return ((BertModel) model).config().architecture() instanceof io.gpupool.model.ModelConfig.Bert bert
                ? bert.vocabSize() : 2;
    }

    /**
     * {@code --jit-warmup} forwards at the smallest shape before the first timed one: the few warm-up runs of a shape
     * leave the forward's host code interpreted, which the first cells (enqueue-bound, batch 1) would pay for.
     */
    private static void jitWarmUp(Options o, InferenceModel model, ExecutionContext context, String output) {
        int batch = Arrays.stream(o.batches()).min().orElse(1);
        int seq = Arrays.stream(o.seqs()).min().orElse(1);
        if (o.jitWarmup() <= 0 || batch > model.maxBatchSize() || seq > model.maxSequenceLength()) {
            return;
        }
        List<HostTensor> inputs = inputs(batch, seq, vocab(model), 7);
        for (int i = 0; i < o.jitWarmup(); i++) {
            model.infer(inputs, Set.of(output), context);
        }
    }

    private static List<Integer> sorted(int[] values) {
        return Arrays.stream(values).sorted().distinct().boxed().toList();
    }

    /** {@code options} with GEMM tuning on. */
    static KernelOptions withTuning(KernelOptions options) {
        return new KernelOptions(options.packedBf16(), options.residualInGemm(), options.warpLayerNorm(), true);
    }

    /**
     * The first run of a graph variant: a miss that schedules the capture (or a hit where the bucket already has its
     * graph), then a wait of up to 20 s for the capture thread to finish it; says whether a graph is there.
     */
    private static Map<String, Object> captureFirst(DeviceGraphs graphs, InferenceModel served, ExecutionContext context,
                                                    List<HostTensor> inputs, String output) {
        GraphCacheMetrics m = graphs.metrics();
        long done = m.captures() + m.captureFailures();
        long hits = m.hits();
        long started = System.nanoTime();
        served.infer(inputs, Set.of(output), context);
        boolean cached = m.hits() > hits;
        while (!cached && m.captures() + m.captureFailures() == done && elapsed(started) < 20) {
            try {
                Thread.sleep(1);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                break;
            }
        }
        Map<String, Object> row = new LinkedHashMap<>();
        row.put("captured", cached || m.captures() > done);
        row.put("capture_ms", round((System.nanoTime() - started) / 1e6, 1));
        return row;
    }

    /** Warm-up, then repetitions until {@code reps} or {@code shape-s} seconds; median, min and max in ms. */
    private static Map<String, Object> time(Options o, InferenceModel model, ExecutionContext context,
                                            List<HostTensor> inputs, String output) {
        Set<String> outputs = Set.of(output);
        for (int i = 0; i < o.warmup(); i++) {
            model.infer(inputs, outputs, context);
        }
        double[] ms = new double[o.reps()];
        int n = 0;
        long begin = System.nanoTime();
        while (n < o.reps() && (n < 3 || elapsed(begin) < o.shapeSeconds())) {
            long t0 = System.nanoTime();
            model.infer(inputs, outputs, context);
            ms[n++] = (System.nanoTime() - t0) / 1e6;
        }
        double[] done = Arrays.copyOf(ms, n);
        Arrays.sort(done);
        Map<String, Object> row = new LinkedHashMap<>();
        row.put("ms", round(median(done), 4));
        row.put("min_ms", round(done[0], 4));
        row.put("max_ms", round(done[n - 1], 4));
        row.put("reps", n);
        return row;
    }

    static double median(double[] sorted) {
        int n = sorted.length;
        return n % 2 == 1 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
    }

    private static void checkAccuracy(Options o, InferenceModel model, ExecutionContext context, String label,
                                      List<Map<String, Object>> accuracy) {
        Path referencePath = o.model().resolve("reference.safetensors");
        if (!Files.isRegularFile(referencePath)) {
            return;
        }
        try (SafetensorsFile ref = SafetensorsFile.open(referencePath)) {
            List<HostTensor> inputs = new ArrayList<>();
            for (String name : List.of(BertModel.INPUT_IDS, BertModel.ATTENTION_MASK, BertModel.TOKEN_TYPE_IDS)) {
                if (ref.tensors().containsKey(name)) {
                    long[] values = ref.readLongs(name);
                    MemorySegment data = Arena.ofAuto().allocate((long) values.length * Long.BYTES, 8);
                    MemorySegment.copy(values, 0, data, ValueLayout.JAVA_LONG, 0, values.length);
                    inputs.add(new HostTensor(name, DataType.INT64, ref.info(name).shape(), data));
                }
            }
            float[] expected = ref.readFloats(BertModel.LAST_HIDDEN_STATE);
            HostTensor out = model.infer(inputs, Set.of(BertModel.LAST_HIDDEN_STATE), context).getFirst();
            float[] actual = out.data().toArray(ValueLayout.JAVA_FLOAT);
            double maxDiff = 0;
            double maxRef = 0;
            boolean nan = false;
            for (int i = 0; i < expected.length; i++) {
                nan |= Float.isNaN(actual[i]);
                maxDiff = Math.max(maxDiff, Math.abs((double) expected[i] - actual[i]));
                maxRef = Math.max(maxRef, Math.abs(expected[i]));
            }
            Map<String, Object> row = new LinkedHashMap<>();
            row.put("precision", label);
            row.put("shape", Arrays.toString(out.shape()));
            row.put("max_abs_diff", nan || expected.length != actual.length ? "NaN or size mismatch" : maxDiff);
            row.put("max_abs_reference", maxRef);
            accuracy.add(row);
            log("accuracy " + row);
        }
    }

    /** One forward with ops timed: enqueue time without syncs, then device time with a sync after every op. */
    private static Map<String, Object> profile(InferenceModel model, DeviceStream stream, DevicePool pool,
                                               TensorOps ops, String label, int batch, int seq, String output,
                                               int vocab) {
        List<HostTensor> inputs = inputs(batch, seq, vocab, 42);
        Set<String> outputs = Set.of(output);
        TimingOps enqueue = new TimingOps(ops, false);
        model.infer(inputs, outputs, new ExecutionContext(stream, pool, enqueue));
        enqueue.reset();
        long t0 = System.nanoTime();
        model.infer(inputs, outputs, new ExecutionContext(stream, pool, enqueue));
        double wall = (System.nanoTime() - t0) / 1e6;
        TimingOps synced = new TimingOps(ops, true);
        model.infer(inputs, outputs, new ExecutionContext(stream, pool, synced));
        synced.reset();
        t0 = System.nanoTime();
        model.infer(inputs, outputs, new ExecutionContext(stream, pool, synced));
        double syncedWall = (System.nanoTime() - t0) / 1e6;
        Map<String, Object> row = new LinkedHashMap<>();
        row.put("precision", label);
        row.put("batch", batch);
        row.put("seq", seq);
        row.put("wall_ms", round(wall, 3));
        row.put("ops", enqueue.launches());
        if (ops instanceof CudaTensorOps cuda) {
            long before = cuda.launches();
            model.infer(inputs, outputs, new ExecutionContext(stream, pool, ops));
            row.put("launches", cuda.launches() - before);   // kernels plus library calls of one forward
        }
        row.put("enqueue_ms_total", round(enqueue.totalMs(), 3));
        row.put("enqueue_ms", enqueue.summary());
        row.put("synced_wall_ms", round(syncedWall, 3));
        row.put("device_ms", synced.summary());
        row.put("between_ops_ms", round(synced.betweenMs(), 3));
        log("profile " + row);
        return row;
    }

    /**
     * Kernel launches plus library calls of one forward through {@code ops} (after one forward that plans, and with
     * tuning measures, the shapes): the measured choice may trade one library call for several own kernels.
     */
    private static long launchesPerForward(InferenceModel model, DeviceStream stream, DevicePool pool,
                                           CudaTensorOps ops, int batch, int seq, String output, int vocab) {
        List<HostTensor> inputs = inputs(batch, seq, vocab, 42);
        ExecutionContext context = new ExecutionContext(stream, pool, ops);
        model.infer(inputs, Set.of(output), context);
        long before = ops.launches();
        model.infer(inputs, Set.of(output), context);
        return ops.launches() - before;
    }

    /** Random ids in [1, vocab), all-ones mask, zero token types, INT64 as a client sends them. */
    static List<HostTensor> inputs(int batch, int seq, int vocab, long seed) {
        Random random = new Random(seed);
        long[] shape = {batch, seq};
        int n = batch * seq;
        Arena arena = Arena.ofAuto();
        MemorySegment ids = arena.allocate((long) n * Long.BYTES, 8);
        MemorySegment mask = arena.allocate((long) n * Long.BYTES, 8);
        MemorySegment types = arena.allocate((long) n * Long.BYTES, 8);
        for (int i = 0; i < n; i++) {
            ids.setAtIndex(ValueLayout.JAVA_LONG, i, 1 + random.nextInt(Math.max(1, vocab - 1)));
            mask.setAtIndex(ValueLayout.JAVA_LONG, i, 1);
            types.setAtIndex(ValueLayout.JAVA_LONG, i, 0);
        }
        return List.of(new HostTensor(BertModel.INPUT_IDS, DataType.INT64, shape, ids),
                new HostTensor(BertModel.ATTENTION_MASK, DataType.INT64, shape, mask),
                new HostTensor(BertModel.TOKEN_TYPE_IDS, DataType.INT64, shape, types));
    }

    /**
     * Delegating {@link TensorOps} that accumulates, per op kind (linear keyed by its shape and activation), the
     * host time of each call; with {@code sync} it synchronises the stream inside each call, so the time is the
     * op's device time plus one synchronisation, and it also measures the host time between calls.
     */
    static final class TimingOps implements TensorOps {
        private final TensorOps ops;
        private final boolean sync;
        private final Map<String, double[]> times = new TreeMap<>();
        private long lastEnd;
        private double between;
        private int launches;

        TimingOps(TensorOps ops, boolean sync) {
            this.ops = ops;
            this.sync = sync;
        }

        void reset() {
            times.clear();
            lastEnd = 0;
            between = 0;
            launches = 0;
        }

        int launches() {
            return launches;
        }

        double totalMs() {
            return times.values().stream().mapToDouble(t -> t[0]).sum();
        }

        double betweenMs() {
            return between;
        }

        Map<String, Object> summary() {
            Map<String, Object> out = new LinkedHashMap<>();
            times.forEach((k, v) -> out.put(k, Map.of("ms", round(v[0], 3), "calls", (int) v[1])));
            return out;
        }

        private long begin() {
            long now = System.nanoTime();
            if (lastEnd != 0) {
                between += (now - lastEnd) / 1e6;
            }
            return now;
        }

        private void end(String key, DeviceStream stream, long t0) {
            if (sync) {
                stream.synchronize();
            }
            long now = System.nanoTime();
            double[] t = times.computeIfAbsent(key, k -> new double[2]);
            t[0] += (now - t0) / 1e6;
            t[1]++;
            launches++;
            lastEnd = now;
        }

        @Override
        public void embeddingSum(DeviceStream stream, long inputIds, long tokenTypeIds, long wordTable,
                                 long positionTable, long tokenTypeTable, long out, int batch, int seq, int hidden) {
            long t0 = begin();
            ops.embeddingSum(stream, inputIds, tokenTypeIds, wordTable, positionTable, tokenTypeTable, out, batch, seq,
                    hidden);
            end("embeddingSum", stream, t0);
        }

        @Override
        public int activationBytes() {
            return ops.activationBytes();
        }

        @Override
        public TensorOps fp32Activations() {
            return ops.fp32Activations();
        }

        @Override
        public void embeddingLayerNorm(DeviceStream stream, long inputIds, long tokenTypeIds, long wordTable,
                                       long positionTable, long tokenTypeTable, long gamma, long beta, long out,
                                       int batch, int seq, int hidden, float eps) {
            long t0 = begin();
            ops.embeddingLayerNorm(stream, inputIds, tokenTypeIds, wordTable, positionTable, tokenTypeTable, gamma,
                    beta, out, batch, seq, hidden, eps);
            end("embeddingLayerNorm", stream, t0);
        }

        @Override
        public void toFloat32(DeviceStream stream, long source, long destination, long count) {
            long t0 = begin();
            ops.toFloat32(stream, source, destination, count);
            end("toFloat32", stream, t0);
        }

        @Override
        public void linearAddLayerNorm(DeviceStream stream, long x, long weight, long bias, long residual, long gamma,
                                       long beta, long y, int rows, int in, int out, float eps) {
            long t0 = begin();
            ops.linearAddLayerNorm(stream, x, weight, bias, residual, gamma, beta, y, rows, in, out, eps);
            end("linearAddLayerNorm " + in + "->" + out, stream, t0);
        }

        @Override
        public void linear(DeviceStream stream, long x, long weight, long bias, long y, int rows, int in, int out,
                           Activation activation) {
            long t0 = begin();
            ops.linear(stream, x, weight, bias, y, rows, in, out, activation);
            end("linear " + in + "->" + out + (activation == Activation.NONE ? "" : " " + activation), stream, t0);
        }

        @Override
        public long attentionWorkspaceBytes(int batch, int seq, int heads, int headDim) {
            return ops.attentionWorkspaceBytes(batch, seq, heads, headDim);
        }

        @Override
        public void attention(DeviceStream stream, long qkv, long attentionMask, long workspace, long context,
                              int batch, int seq, int heads, int headDim) {
            long t0 = begin();
            ops.attention(stream, qkv, attentionMask, workspace, context, batch, seq, heads, headDim);
            end("attention", stream, t0);
        }

        @Override
        public void addLayerNorm(DeviceStream stream, long x, long residual, long gamma, long beta, long y, int rows,
                                 int cols, float eps) {
            long t0 = begin();
            ops.addLayerNorm(stream, x, residual, gamma, beta, y, rows, cols, eps);
            end("addLayerNorm", stream, t0);
        }

        @Override
        public void pool(DeviceStream stream, long hidden, long attentionMask, long out, int batch, int seq, int cols,
                         Pooling pooling) {
            long t0 = begin();
            ops.pool(stream, hidden, attentionMask, out, batch, seq, cols, pooling);
            end("pool", stream, t0);
        }

        @Override
        public void softmax(DeviceStream stream, long x, long y, int rows, int cols) {
            long t0 = begin();
            ops.softmax(stream, x, y, rows, cols);
            end("softmax", stream, t0);
        }
    }

    private static double elapsed(long since) {
        return (System.nanoTime() - since) / 1e9;
    }

    private static double round(double value, int digits) {
        double scale = Math.pow(10, digits);
        return Math.round(value * scale) / scale;
    }

    private static void log(String message) {
        System.err.println("[bert-bench] " + message);
    }

    /** Writes {@code doc} as JSON through a temporary file, so a reader never sees half a document. */
    static void write(Path out, Map<String, Object> doc) {
        try {
            Path parent = out.toAbsolutePath().getParent();
            Files.createDirectories(parent);
            Path tmp = parent.resolve(out.getFileName() + ".tmp");
            StringBuilder sb = new StringBuilder();
            json(sb, doc, "");
            sb.append('\n');
            Files.writeString(tmp, sb);
            Files.move(tmp, out, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
        } catch (IOException e) {
            throw new UncheckedIOException("cannot write " + out, e);
        }
    }

    private static void json(StringBuilder sb, Object value, String indent) {
        switch (value) {
            case null -> sb.append("null");
            case Map<?, ?> map -> {
                sb.append('{');
                String inner = indent + " ";
                boolean first = true;
                for (Map.Entry<?, ?> e : map.entrySet()) {
                    sb.append(first ? "\n" : ",\n").append(inner);
                    first = false;
                    string(sb, String.valueOf(e.getKey()));
                    sb.append(": ");
                    json(sb, e.getValue(), inner);
                }
                sb.append(first ? "}" : "\n" + indent + "}");
            }
            case List<?> list -> {
                sb.append('[');
                String inner = indent + " ";
                boolean first = true;
                for (Object item : list) {
                    sb.append(first ? "\n" : ",\n").append(inner);
                    first = false;
                    json(sb, item, inner);
                }
                sb.append(first ? "]" : "\n" + indent + "]");
            }
            case Double d when d.isNaN() || d.isInfinite() -> sb.append("null");
            case Number n -> sb.append(n);
            case Boolean b -> sb.append(b);
            default -> string(sb, value.toString());
        }
    }

    private static void string(StringBuilder sb, String s) {
        sb.append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"' -> sb.append("\\\"");
                case '\\' -> sb.append("\\\\");
                case '\n' -> sb.append("\\n");
                case '\t' -> sb.append("\\t");
                default -> {
                    if (c < 0x20) {
                        sb.append(String.format("\\u%04x", (int) c));
                    } else {
                        sb.append(c);
                    }
                }
            }
        }
        sb.append('"');
    }
}
