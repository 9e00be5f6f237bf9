package io.gpupool.lab;

import io.gpupool.backend.ComputeBackend;
import io.gpupool.backend.ComputeDevice;
import io.gpupool.backend.DeviceStream;
import io.gpupool.backend.cuda.CudaBackend;
import io.gpupool.backend.host.HostBackend;
import io.gpupool.kernels.TensorOps;
import io.gpupool.kernels.cuda.CudaTensorOps;
import io.gpupool.kernels.cuda.Precision;
import io.gpupool.kernels.host.HostTensorOps;
import io.gpupool.memory.DeviceAllocator;
import io.gpupool.memory.metric.AllocatorMode;
import io.gpupool.model.LoadTarget;
import io.gpupool.model.PlannedMemory;
import io.gpupool.model.repository.ModelRepository;
import io.gpupool.model.testing.SafetensorsBuilder;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * How close a request arena ({@code gpupool.serving.request-arena}) comes to the liveness peak, and what one packing
 * costs: a BERT-base-shaped encoder (hidden 768, intermediate 3072, 12 heads, 12 layers; zero weights, vocabulary
 * 1000) is loaded twice, with a block per tensor and with arenas, and for every shape of a grid the planned peak of
 * each is written, with the time of packings of shapes never packed before.
 *
 * <pre>
 *   tools: java -cp ... io.gpupool.lab.ArenaPackingBench OUT.json [host | cuda-bf16 | cuda-fp32]
 * </pre>
 */
public final class ArenaPackingBench {

    private static final int HIDDEN = 768;
    private static final int INTERMEDIATE = 3072;
    private static final int LAYERS = 12;
    private static final int VOCAB = 1000;

    private ArenaPackingBench() {
    }

    public static void main(String[] args) throws IOException {
        Path out = Path.of(args.length > 0 ? args[0] : "arena-packing.json");
        String kernels = args.length > 1 ? args[1] : "host";
        Path folder = Files.createTempDirectory("arena-packing");
        writeModel(folder.resolve("bert-base-shaped"));
        Map<String, Object> doc = new LinkedHashMap<>();
        doc.put("bench", "gpupool_arena_packing");
        doc.put("kernels", kernels);
        doc.put("model", Map.of("hidden", HIDDEN, "intermediate", INTERMEDIATE, "layers", LAYERS));
        List<Map<String, Object>> shapes = new ArrayList<>();
        doc.put("shapes", shapes);
        try (ComputeBackend backend = kernels.equals("host") ? new HostBackend()
                : CudaBackend.tryCreate().orElseThrow(() -> new IllegalStateException("no CUDA device"))) {
            ComputeDevice device = backend.devices().getFirst();
            device.bindToCurrentThread();
            TensorOps ops = switch (kernels) {
                case "host" -> new HostTensorOps();
                case "cuda-bf16" -> new CudaTensorOps(device, Precision.BF16);
                case "cuda-fp32" -> new CudaTensorOps(device, Precision.FP32);
                default -> throw new IllegalArgumentException("kernels '" + kernels
                        + "', expected host, cuda-bf16 or cuda-fp32");
            };
            DeviceAllocator weights = device.nativeAllocator(AllocatorMode.DIRECT).orElseThrow();
            try (DeviceStream stream = device.createStream(0);
                 var perTensor = ModelRepository.loadModel("bert-base-shaped", folder.resolve("bert-base-shaped"),
                         new LoadTarget(stream, weights, ops, false));
                 var inArena = ModelRepository.loadModel("bert-base-shaped", folder.resolve("bert-base-shaped"),
                         new LoadTarget(stream, weights, ops, true))) {
                PlannedMemory liveness = (PlannedMemory) perTensor;
                PlannedMemory arena = (PlannedMemory) inArena;
                double worst = 1;
                for (int batch : new int[]{1, 2, 4, 8, 16, 32}) {
                    for (int seq : new int[]{16, 37, 64, 96, 128, 200, 256, 384, 512}) {
                        long peak = liveness.peakActivationBytes(batch, seq);
                        long bytes = arena.peakActivationBytes(batch, seq);
                        worst = Math.max(worst, (double) bytes / peak);
                        shapes.add(Map.of("batch", batch, "seq", seq, "liveness_bytes", peak, "arena_bytes", bytes,
                                "ratio", (double) bytes / peak));
                    }
                }
                doc.put("worst_ratio", worst);
                doc.put("packing_us", packingMicros(arena));
            } finally {
                weights.close();
            }
        } catch (Exception e) {
            doc.put("error", e.toString());
        }
        BertGpuBench.write(out, doc);
        System.out.println("worst arena / liveness " + doc.get("worst_ratio") + ", one packing "
                + doc.get("packing_us") + " us; written " + out);
    }

    /** Median over rounds of the time per packing of 500 shapes none of which was packed before. */
    private static double packingMicros(PlannedMemory arena) {
        List<Double> rounds = new ArrayList<>();
        int seq = 600;                                 // above the grid: every shape below is new
        for (int round = 0; round < 9; round++) {
            long start = System.nanoTime();
            for (int i = 0; i < 500; i++) {
                arena.peakActivationBytes(1 + i % 32, seq + round * 20 + i / 32);
            }
            rounds.add((System.nanoTime() - start) / 1e3 / 500);
        }
        rounds.sort(Double::compare);
        return rounds.get(rounds.size() / 2);
    }

    private static void writeModel(Path dir) throws IOException {
        Files.createDirectories(dir);
        Files.writeString(dir.resolve("config.json"), """
                {"architectures": ["BertModel"], "model_type": "bert", "hidden_size": %d, "intermediate_size": %d,
                 "num_attention_heads": 12, "num_hidden_layers": %d, "max_position_embeddings": 512,
                 "type_vocab_size": 2, "vocab_size": %d, "layer_norm_eps": 1e-12, "hidden_act": "gelu",
                 "gpupool": {"max_batch_size": 32, "max_sequence_length": 512}}
                """.formatted(HIDDEN, INTERMEDIATE, LAYERS, VOCAB));
        Map<String, long[]> shapes = new LinkedHashMap<>();
        shapes.put("embeddings.word_embeddings.weight", new long[]{VOCAB, HIDDEN});
        shapes.put("embeddings.position_embeddings.weight", new long[]{512, HIDDEN});
        shapes.put("embeddings.token_type_embeddings.weight", new long[]{2, HIDDEN});
        shapes.put("embeddings.LayerNorm.weight", new long[]{HIDDEN});
        shapes.put("embeddings.LayerNorm.bias", new long[]{HIDDEN});
        for (int l = 0; l < LAYERS; l++) {
            String p = "encoder.layer." + l + ".";
            for (String q : new String[]{"query", "key", "value"}) {
                shapes.put(p + "attention.self." + q + ".weight", new long[]{HIDDEN, HIDDEN});
                shapes.put(p + "attention.self." + q + ".bias", new long[]{HIDDEN});
            }
            shapes.put(p + "attention.output.dense.weight", new long[]{HIDDEN, HIDDEN});
            shapes.put(p + "attention.output.dense.bias", new long[]{HIDDEN});
            shapes.put(p + "attention.output.LayerNorm.weight", new long[]{HIDDEN});
            shapes.put(p + "attention.output.LayerNorm.bias", new long[]{HIDDEN});
            shapes.put(p + "intermediate.dense.weight", new long[]{INTERMEDIATE, HIDDEN});
            shapes.put(p + "intermediate.dense.bias", new long[]{INTERMEDIATE});
            shapes.put(p + "output.dense.weight", new long[]{HIDDEN, INTERMEDIATE});
            shapes.put(p + "output.dense.bias", new long[]{HIDDEN});
            shapes.put(p + "output.LayerNorm.weight", new long[]{HIDDEN});
            shapes.put(p + "output.LayerNorm.bias", new long[]{HIDDEN});
        }
        shapes.put("pooler.dense.weight", new long[]{HIDDEN, HIDDEN});
        shapes.put("pooler.dense.bias", new long[]{HIDDEN});
        SafetensorsBuilder.allF32(shapes).write(dir.resolve("model.safetensors"));
    }
}
