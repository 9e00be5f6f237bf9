package io.gpupool.lab;

import io.gpupool.backend.ComputeDevice;
import io.gpupool.backend.DeviceStream;
import io.gpupool.backend.cuda.CudaBackend;
import io.gpupool.kernels.cuda.CudaTensorOps;
import io.gpupool.kernels.cuda.Precision;
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
import io.gpupool.model.graph.DeviceGraphs;
import io.gpupool.model.graph.GraphCacheMetrics;
import io.gpupool.model.graph.GraphLimits;
import io.gpupool.model.graph.ShapeBuckets;

import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Random;
import java.util.Set;

/**
 * Latency of a BERT-base forward with CUDA graphs off (eager: one launch per op) and on (the
 * forward replayed from a graph captured for its shape bucket), per precision and shape, through
 * the serving path ({@link DevicePool} activations, the model's {@code infer}). Writes JSON.
 *
 * <p>The model is BERT-base (hidden 768, 12 layers, 12 heads, FFN 3072, vocabulary 30522, no pooler)
 * with seeded uniform random weights written here, so the benchmark needs no Python. Timed: the wall
 * time of one {@code infer} asking for {@code embedding} (every layer runs; the download is B×768
 * floats), median of the repetitions after warm-up; inputs random ids, a mask hiding the last quarter
 * of each sequence, zero token types. Also recorded per shape: the largest difference between the
 * graphed and the eager outputs, and the graph's pool bytes; at the end, the pool's allocated bytes
 * after the graphs were freed (0 expected).
 *
 * <pre>
 *   GraphsGpuBench OUT.json [--precisions FP32,BF16] [--shapes 1x16,1x128,8x128,8x100] [--reps 50] [--warmup 5]
 *                  [--launch ffm|jcuda] [--graphs on|off]
 * </pre>
 * {@code --launch jcuda} makes the streams launch kernels through JCuda instead of the default FFM binding
 * ({@code CudaBackend.Options.ffmLaunches}), for comparing the two on whole forwards; {@code --graphs off} measures
 * the eager forward only.
 */
public final class GraphsGpuBench {

    private static final int HIDDEN = 768;
    private static final int LAYERS = 12;
    private static final int INTERMEDIATE = 3072;
    private static final int VOCAB = 30522;
    private static final int POSITIONS = 512;

    private GraphsGpuBench() {
    }

    public static void main(String[] args) throws Exception {
        Path out = Path.of(args[0]);
        Map<String, String> options = new LinkedHashMap<>(Map.of("--precisions", "FP32,BF16",
                "--shapes", "1x16,1x128,8x128,8x100", "--reps", "50", "--warmup", "5", "--launch", "ffm",
                "--graphs", "on"));
        for (int i = 1; i + 1 < args.length; i += 2) {
            options.put(args[i], args[i + 1]);
        }
        int reps = Integer.parseInt(options.get("--reps"));
        int warmup = Integer.parseInt(options.get("--warmup"));
        List<int[]> shapes = new ArrayList<>();
        for (String shape : options.get("--shapes").split(",")) {
            String[] bs = shape.split("x");
            shapes.add(new int[] {Integer.parseInt(bs[0]), Integer.parseInt(bs[1])});
        }
        Map<String, Object> doc = new LinkedHashMap<>();
        List<Map<String, Object>> results = new ArrayList<>();
        doc.put("bench", "gpupool_graphs");
        doc.put("status", "running");
        doc.put("model", "BERT-base, random weights, no pooler");
        boolean ffmLaunches = switch (options.get("--launch")) {
            case "ffm" -> true;
            case "jcuda" -> false;
            default -> throw new IllegalArgumentException("--launch must be ffm or jcuda, got " + options.get("--launch"));
        };
        boolean withGraphs = switch (options.get("--graphs")) {
            case "on" -> true;
            case "off" -> false;
            default -> throw new IllegalArgumentException("--graphs must be on or off, got " + options.get("--graphs"));
        };
        doc.put("options", Map.of("reps", reps, "warmup", warmup, "launch", options.get("--launch"),
                "graphs", withGraphs));
        doc.put("results", results);
        BertGpuBench.write(out, doc);

        Path folder = Files.createTempDirectory("graphs-bench-bert");
        long t0 = System.nanoTime();
        writeBertBase(folder.resolve("bert-base"));
        log("wrote BERT-base in " + seconds(t0) + " s");

        try (CudaBackend cuda = CudaBackend.tryCreate(CudaBackend.Options.defaults().withFfmLaunches(ffmLaunches))
                .orElseThrow(() -> new IllegalStateException("no CUDA device"))) {
            ComputeDevice device = cuda.devices().getFirst();
            device.bindToCurrentThread();
            doc.put("device", device.name());
            DeviceAllocator weights = device.nativeAllocator(AllocatorMode.DIRECT).orElseThrow();
            DevicePool pool = new DevicePool(device.chunkSource(), PoolConfig.defaults());
            DeviceStream stream = device.createStream(0);
            CudaTensorOps planning = new CudaTensorOps(device, Precision.FP32);
            InferenceModel bert = ModelRepository.loadModel("bert-base", folder.resolve("bert-base"),
                    new LoadTarget(stream, weights, planning));
            ShapeBuckets buckets = new ShapeBuckets(List.of(1, 2, 4, 8, 16, 32), List.of(16, 32, 64, 128, 256, 512));
            DeviceGraphs graphs = DeviceGraphs.open(device, pool, new GraphLimits(true, 64, 4L << 30), buckets, 1)
                    .orElseThrow();
            InferenceModel graphed = graphs.wrap(bert);
            Random random = new Random(14);
            try {
                for (String name : options.get("--precisions").split(",")) {
                    Precision precision = Precision.valueOf(name.trim().toUpperCase(Locale.ROOT));
                    ExecutionContext context = new ExecutionContext(stream, pool,
                            precision == Precision.FP32 ? planning : new CudaTensorOps(device, precision));
                    for (int[] shape : shapes) {
                        List<HostTensor> inputs = request(random, shape[0], shape[1]);
                        Map<String, Object> row = new LinkedHashMap<>();
                        row.put("precision", precision.name());
                        row.put("batch", shape[0]);
                        row.put("seq", shape[1]);
                        double eager = medianMs(bert, inputs, context, warmup, reps);
                        if (!withGraphs) {
                            row.put("eager_ms", round(eager, 3));
                            results.add(row);
                            log(row.toString());
                            BertGpuBench.write(out, doc);
                            continue;
                        }
                        GraphCacheMetrics m = graphs.metrics();
                        long capturesBefore = m.captures() + m.failures();
                        long hitsBefore = m.hits();
                        long bytesBefore = m.bytes();
                        long captureStart = System.nanoTime();
                        graphed.infer(inputs, Set.of("embedding"), context);   // a miss queues the capture
                        boolean alreadyCached = m.hits() > hitsBefore;         // bucket captured for another shape
                        while (!alreadyCached && m.captures() + m.failures() == capturesBefore
                                && seconds(captureStart) < 10) {
                            Thread.sleep(1);
                        }
                        row.put("capture_ms", alreadyCached ? 0.0 : round((System.nanoTime() - captureStart) / 1e6, 2));
                        row.put("graph_shared_with_bucket", alreadyCached);
                        row.put("captured", alreadyCached || m.captures() > capturesBefore);
                        hitsBefore = m.hits();
                        double replayed = medianMs(graphed, inputs, context, warmup, reps);
                        row.put("eager_ms", round(eager, 3));
                        row.put("graphs_ms", round(replayed, 3));
                        row.put("speedup", round(eager / replayed, 3));
                        row.put("replays", m.hits() - hitsBefore);
                        row.put("graph_bytes", m.bytes() - bytesBefore);
                        row.put("max_abs_diff", maxAbsDiff(graphed.infer(inputs, Set.of("embedding", "last_hidden_state"),
                                context), bert.infer(inputs, Set.of("embedding", "last_hidden_state"), context)));
                        results.add(row);
                        log(row.toString());
                        BertGpuBench.write(out, doc);
                    }
                }
                GraphCacheMetrics m = graphs.metrics();
                doc.put("graphs", Map.of("graphs", m.graphs(), "bytes", m.bytes(), "hits", m.hits(), "misses", m.misses(),
                        "captures", m.captures(), "capture_failures", m.captureFailures(),
                        "replay_failures", m.replayFailures(), "evictions", m.evictions()));
                doc.put("pool_allocated_bytes_with_graphs", pool.metrics().allocatedBytes());
                graphed.close();
                doc.put("pool_allocated_bytes_after_unload", pool.metrics().allocatedBytes());
                doc.put("status", "done");
            } catch (RuntimeException | Error e) {
                doc.put("status", "failed: " + e);
                throw e;
            } finally {
                BertGpuBench.write(out, doc);
                graphs.close();
                bert.close();
                stream.close();
                pool.close();
                weights.close();
            }
        }
    }

    private static double medianMs(InferenceModel model, List<HostTensor> inputs, ExecutionContext context, int warmup,
                                   int reps) {
        for (int i = 0; i < warmup; i++) {
            model.infer(inputs, Set.of("embedding"), context);
        }
        double[] ms = new double[reps];
        for (int i = 0; i < reps; i++) {
            long start = System.nanoTime();
            model.infer(inputs, Set.of("embedding"), context);
            ms[i] = (System.nanoTime() - start) / 1e6;
        }
        Arrays.sort(ms);
        return ms[reps / 2];
    }

    private static double maxAbsDiff(List<HostTensor> actual, List<HostTensor> expected) {
        double worst = 0;
        for (int t = 0; t < expected.size(); t++) {
            MemorySegment a = actual.get(t).data();
            MemorySegment e = expected.get(t).data();
            long n = e.byteSize() / Float.BYTES;
            for (long i = 0; i < n; i++) {
                worst = Math.max(worst, Math.abs(a.getAtIndex(java.lang.foreign.ValueLayout.JAVA_FLOAT, i)
                        - e.getAtIndex(java.lang.foreign.ValueLayout.JAVA_FLOAT, i)));
            }
        }
        return worst;
    }

    private static List<HostTensor> request(Random random, int batch, int seq) {
        long[] ids = new long[batch * seq];
        long[] mask = new long[batch * seq];
        for (int i = 0; i < ids.length; i++) {
            ids[i] = random.nextInt(VOCAB);
            mask[i] = (i % seq) < Math.max(1, seq * 3 / 4) ? 1 : 0;
        }
        long[] shape = {batch, seq};
        return List.of(new HostTensor("input_ids", DataType.INT64, shape, MemorySegment.ofArray(ids)),
                new HostTensor("attention_mask", DataType.INT64, shape, MemorySegment.ofArray(mask)),
                new HostTensor("token_type_ids", DataType.INT64, shape, MemorySegment.ofArray(new long[ids.length])));
    }

    /** config.json and model.safetensors of a BERT-base with uniform random weights in ±0.05 (LayerNorm: 1 and 0). */
    static void writeBertBase(Path folder) throws IOException {
        Files.createDirectories(folder);
        Files.writeString(folder.resolve("config.json"), """
                {"architectures": ["BertModel"], "model_type": "bert", "hidden_size": %d, "num_hidden_layers": %d,
                 "num_attention_heads": 12, "intermediate_size": %d, "hidden_act": "gelu", "vocab_size": %d,
                 "max_position_embeddings": %d, "type_vocab_size": 2, "layer_norm_eps": 1e-12,
                 "gpupool": {"max_batch_size": 32, "max_sequence_length": 512,
                             "outputs": ["last_hidden_state", "embedding"], "pooling": "mean"}}
                """.formatted(HIDDEN, LAYERS, INTERMEDIATE, VOCAB, POSITIONS));
        Map<String, long[]> tensors = new LinkedHashMap<>();
        tensors.put("embeddings.word_embeddings.weight", new long[] {VOCAB, HIDDEN});
        tensors.put("embeddings.position_embeddings.weight", new long[] {POSITIONS, HIDDEN});
        tensors.put("embeddings.token_type_embeddings.weight", new long[] {2, HIDDEN});
        tensors.put("embeddings.LayerNorm.weight", new long[] {HIDDEN});
        tensors.put("embeddings.LayerNorm.bias", new long[] {HIDDEN});
        for (int layer = 0; layer < LAYERS; layer++) {
            String p = "encoder.layer." + layer + ".";
            for (String qkv : List.of("query", "key", "value")) {
                tensors.put(p + "attention.self." + qkv + ".weight", new long[] {HIDDEN, HIDDEN});
                tensors.put(p + "attention.self." + qkv + ".bias", new long[] {HIDDEN});
            }
            tensors.put(p + "attention.output.dense.weight", new long[] {HIDDEN, HIDDEN});
            tensors.put(p + "attention.output.dense.bias", new long[] {HIDDEN});
            tensors.put(p + "attention.output.LayerNorm.weight", new long[] {HIDDEN});
            tensors.put(p + "attention.output.LayerNorm.bias", new long[] {HIDDEN});
            tensors.put(p + "intermediate.dense.weight", new long[] {INTERMEDIATE, HIDDEN});
            tensors.put(p + "intermediate.dense.bias", new long[] {INTERMEDIATE});
            tensors.put(p + "output.dense.weight", new long[] {HIDDEN, INTERMEDIATE});
            tensors.put(p + "output.dense.bias", new long[] {HIDDEN});
            tensors.put(p + "output.LayerNorm.weight", new long[] {HIDDEN});
            tensors.put(p + "output.LayerNorm.bias", new long[] {HIDDEN});
        }
        StringBuilder header = new StringBuilder("{");
        long offset = 0;
        for (Map.Entry<String, long[]> e : tensors.entrySet()) {
            long bytes = Arrays.stream(e.getValue()).reduce(1, (a, b) -> a * b) * Float.BYTES;
            header.append(header.length() > 1 ? "," : "").append('"').append(e.getKey()).append("\":{\"dtype\":\"F32\",")
                    .append("\"shape\":").append(Arrays.toString(e.getValue()).replace(" ", ""))
                    .append(",\"data_offsets\":[").append(offset).append(',').append(offset + bytes).append("]}");
            offset += bytes;
        }
        header.append('}');
        byte[] head = header.toString().getBytes(StandardCharsets.UTF_8);
        try (FileChannel file = FileChannel.open(folder.resolve("model.safetensors"), StandardOpenOption.CREATE,
                StandardOpenOption.WRITE, StandardOpenOption.TRUNCATE_EXISTING)) {
            ByteBuffer prefix = ByteBuffer.allocate(8 + head.length).order(ByteOrder.LITTLE_ENDIAN);
            prefix.putLong(head.length).put(head).flip();
            file.write(prefix);
            long state = 1234;
            ByteBuffer chunk = ByteBuffer.allocateDirect(1 << 22).order(ByteOrder.LITTLE_ENDIAN);
            for (Map.Entry<String, long[]> e : tensors.entrySet()) {
                long n = Arrays.stream(e.getValue()).reduce(1, (a, b) -> a * b);
                boolean gamma = e.getKey().endsWith("LayerNorm.weight");
                boolean beta = e.getKey().endsWith("LayerNorm.bias");
                for (long i = 0; i < n; i++) {
                    float value;
                    if (gamma || beta) {
                        value = gamma ? 1f : 0f;
                    } else {
                        state = state * 6364136223846793005L + 1442695040888963407L;
                        value = ((state >>> 40) / (float) (1 << 24) - 0.5f) * 0.1f;
                    }
                    chunk.putFloat(value);
                    if (!chunk.hasRemaining()) {
                        chunk.flip();
                        file.write(chunk);
                        chunk.clear();
                    }
                }
            }
            chunk.flip();
            file.write(chunk);
        }
    }

    private static double seconds(long since) {
        return (System.nanoTime() - since) / 1e9;
    }

    private static double round(double value, int digits) {
        double scale = Math.pow(10, digits);
        return Math.round(value * scale) / scale;
    }

    private static void log(String message) {
        System.err.println("[graphs-bench] " + message);
    }
}
