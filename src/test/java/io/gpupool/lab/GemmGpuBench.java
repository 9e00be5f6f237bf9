package io.gpupool.lab;

import io.gpupool.backend.ComputeDevice;
import io.gpupool.backend.DeviceStream;
import io.gpupool.backend.MatmulLibrary;
import io.gpupool.backend.cuda.CudaBackend;
import io.gpupool.kernels.TensorOps.Activation;
import io.gpupool.kernels.cuda.CudaTensorOps;
import io.gpupool.kernels.cuda.KernelOptions;
import io.gpupool.kernels.cuda.Precision;
import io.gpupool.memory.metric.AllocatorMode;
import io.gpupool.memory.DeviceAllocator;
import io.gpupool.memory.DeviceBlock;
import io.gpupool.memory.pool.DevicePool;
import io.gpupool.memory.PoolConfig;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Random;

/**
 * The linear layers of BERT-base, alone: {@code tokens × 768 → 2304} (QKV), {@code 768 → 768} (attention output),
 * {@code 768 → 3072} (intermediate, GELU) and {@code 3072 → 768} (output), for FP32, TF32 and BF16, on cuBLASLt
 * (through {@link CudaTensorOps} built with the device's {@link MatmulLibrary}; engine "cublaslt" the heuristic's first
 * choice, "cublaslt-tuned" with {@code gpupool.kernels.gemm-tuning}: the fastest of the library's first algorithms
 * and the own kernel, measured in the warm-up, its name in the row's {@code chosen}) and on gpupool's own kernels.
 * Writes JSON with TFLOP/s (2·tokens·in·out per product) for each shape, precision and engine.
 *
 * <p>Timing: warm-up, then 5 batches of {@code reps} products enqueued back to back, each ended by a synchronisation;
 * the median batch's mean per product (enqueue overlaps the device, so at large shapes this is device time). The
 * heuristic's and the measured choice take turns shape by shape on the same buffers. BF16 on cuBLASLt reads and writes bf16
 * (the buffers hold bf16 values); the own BF16 kernels read FP32 and round as they load.
 *
 * <p>Accuracy at 64 tokens: each engine and precision against a double-precision host product of the same
 * (FP32) inputs, as max |error| / max |reference|, with the bias and GELU epilogue on the intermediate shape.
 *
 * <pre>
 *   run-gpu-tests.sh --main io.gpupool.lab.GemmGpuBench OUT.json [reps] [tokens,...] [cublasLtDir]
 * </pre>
 */
public final class GemmGpuBench {

    static final int[][] SHAPES = {{768, 2304}, {768, 768}, {768, 3072}, {3072, 768}};

    private GemmGpuBench() {
    }

    public static void main(String[] args) throws Exception {
        Path out = Path.of(args.length > 0 ? args[0] : "gemm-bench.json");
        int reps = args.length > 1 ? Integer.parseInt(args[1]) : 30;
        int[] tokensList = args.length > 2 ? Arrays.stream(args[2].split(",")).mapToInt(Integer::parseInt).toArray()
                : new int[]{16, 128, 1024, 4096, 16384};
        Path libDir = args.length > 3 ? Path.of(args[3]) : null;
        Map<String, Object> doc = new LinkedHashMap<>();
        List<Map<String, Object>> results = new ArrayList<>();
        List<Map<String, Object>> accuracy = new ArrayList<>();
        List<String> errors = new ArrayList<>();
        doc.put("bench", "gpupool_gemm");
        doc.put("reps", reps);
        doc.put("accuracy", accuracy);
        doc.put("results", results);
        doc.put("errors", errors);
        CudaBackend backend = CudaBackend.tryCreate().orElseThrow(() -> new IllegalStateException("no CUDA device"));
        try (backend) {
            ComputeDevice device = backend.devices().getFirst();
            device.bindToCurrentThread();
            doc.put("device", device.name());
            Optional<MatmulLibrary> library = device.matmulLibrary(libDir);
            doc.put("library", library.map(MatmulLibrary::description).orElse("none"));
            BertGpuBench.write(out, doc);
            DeviceAllocator direct = device.nativeAllocator(AllocatorMode.DIRECT).orElseThrow();
            DevicePool pool = new DevicePool(device.chunkSource(), PoolConfig.defaults());
            DeviceStream stream = device.createStream(0);
            int maxTokens = Arrays.stream(tokensList).max().orElse(16384);
            long maxFloats = (long) maxTokens * 3072;
            DeviceBlock x = direct.allocate(maxFloats * 4, stream);
            DeviceBlock y = direct.allocate(maxFloats * 4, stream);
            DeviceBlock w = direct.allocate(3072L * 3072 * 4, stream);
            DeviceBlock bias = direct.allocate(3072L * 4, stream);
            try (Arena arena = Arena.ofShared()) {
                // the same random values as FP32 for the FP32/TF32 buffers; bf16 copies are written per precision
                Random random = new Random(42);
                MemorySegment hostX = arena.allocate(maxFloats * 4, 64);
                MemorySegment hostW = arena.allocate(3072L * 3072 * 4, 64);
                MemorySegment hostB = arena.allocate(3072L * 4, 64);
                fill(hostX, random, 1f);
                fill(hostW, random, 0.05f);
                fill(hostB, random, 0.1f);
                Map<Precision, CudaTensorOps> own = new LinkedHashMap<>();
                Map<Precision, CudaTensorOps> lib = new LinkedHashMap<>();
                Map<Precision, CudaTensorOps> tuned = new LinkedHashMap<>();
                for (Precision p : List.of(Precision.FP32, Precision.TF32, Precision.BF16)) {
                    own.put(p, new CudaTensorOps(device, p));
                    library.ifPresent(l -> lib.put(p, new CudaTensorOps(device, p, l, pool)));
                    library.ifPresent(l -> tuned.put(p, new CudaTensorOps(device, p, l, pool,
                            BertGpuBench.withTuning(KernelOptions.DEFAULT))));
                }
                accuracy(stream, hostX, hostW, hostB, x, w, bias, y, own, lib, accuracy, errors, arena);
                BertGpuBench.write(out, doc);
                for (Precision p : own.keySet()) {
                    // the library with and without the measured choice side by side on the same buffers (they hold
                    // the same activation type), taking turns shape by shape; the own kernels after, on theirs
                    for (List<String> group : List.of(List.of("cublaslt", "cublaslt-tuned"), List.of("own"))) {
                        CudaTensorOps first = group.size() == 1 ? own.get(p) : lib.get(p);
                        if (first == null) {
                            continue;
                        }
                        upload(stream, hostX, hostW, hostB, x, w, bias, first.activationBytes() == 2, arena, maxFloats);
                        for (int tokens : tokensList) {
                            for (int[] shape : SHAPES) {
                                for (String engine : group) {
                                    CudaTensorOps ops = switch (engine) {
                                        case "own" -> own.get(p);
                                        case "cublaslt-tuned" -> tuned.get(p);
                                        default -> lib.get(p);
                                    };
                                    results.add(row(stream, ops, p, engine, x, w, bias, y, tokens, shape, reps, errors));
                                }
                            }
                            BertGpuBench.write(out, doc);
                        }
                    }
                }
                lib.values().forEach(CudaTensorOps::close);
                tuned.values().forEach(CudaTensorOps::close);
            } finally {
                stream.synchronize();
                x.release();
                y.release();
                w.release();
                bias.release();
                stream.close();
                pool.close();
                direct.close();
            }
        }
        doc.put("status", errors.isEmpty() ? "complete" : "errors");
        BertGpuBench.write(out, doc);
    }

    /** One row: the product timed on {@code ops} (see {@link #time}), with the measured choice where tuned. */
    private static Map<String, Object> row(DeviceStream stream, CudaTensorOps ops, Precision p, String engine,
                                           DeviceBlock x, DeviceBlock w, DeviceBlock bias, DeviceBlock y, int tokens,
                                           int[] shape, int reps, List<String> errors) {
        Map<String, Object> row = new LinkedHashMap<>();
        row.put("precision", p.name());
        row.put("engine", engine);
        row.put("engine_name", ops.gemmEngine());
        row.put("tokens", tokens);
        row.put("in", shape[0]);
        row.put("out", shape[1]);
        Activation act = shape[1] == 3072 ? Activation.GELU : Activation.NONE;
        row.put("activation", act.name());
        try {
            double ms = time(stream, ops, x, w, bias, y, tokens, shape[0], shape[1], act, reps);
            row.put("ms", Math.round(ms * 10000) / 10000.0);
            row.put("tflops", Math.round(2.0 * tokens * shape[0] * shape[1] / (ms * 1e-3) / 1e12 * 10) / 10.0);
            if (engine.equals("cublaslt-tuned")) {
                String prefix = tokens + "x" + shape[0] + "->" + shape[1] + " ";
                ops.gemmChoices().stream().filter(c -> c.shape().startsWith(prefix))
                        .findFirst().ifPresent(c -> row.put("chosen", c.engine()));
            }
        } catch (RuntimeException e) {
            row.put("error", e.toString());
            errors.add(p + " " + engine + " " + tokens + "x" + shape[0] + "->" + shape[1] + ": " + e);
        }
        System.out.println("[gemm-bench] " + row);
        return row;
    }

    /**
     * Warm-up (for a tuned ops, the first run measures the shape), then {@link #BATCHES} batches of {@code reps}
     * products back to back, each timed from a synchronised stream to its synchronisation: the median batch's mean
     * per product, so that one batch disturbed by the host does not decide the row.
     */
    private static double time(DeviceStream stream, CudaTensorOps ops, DeviceBlock x, DeviceBlock w, DeviceBlock bias,
                               DeviceBlock y, int tokens, int in, int out, Activation act, int reps) {
        for (int i = 0; i < 3; i++) {
            ops.linear(stream, x.address(), w.address(), bias.address(), y.address(), tokens, in, out, act);
        }
        stream.synchronize();
        double[] batches = new double[BATCHES];
        for (int b = 0; b < BATCHES; b++) {
            long t0 = System.nanoTime();
            for (int i = 0; i < reps; i++) {
                ops.linear(stream, x.address(), w.address(), bias.address(), y.address(), tokens, in, out, act);
            }
            stream.synchronize();
            batches[b] = (System.nanoTime() - t0) / 1e6 / reps;
        }
        Arrays.sort(batches);
        return batches[BATCHES / 2];
    }

    /** Timed batches per row (see {@link #time}). */
    static final int BATCHES = 5;

    private static void accuracy(DeviceStream stream, MemorySegment hostX, MemorySegment hostW, MemorySegment hostB,
                                 DeviceBlock x, DeviceBlock w, DeviceBlock bias, DeviceBlock y,
                                 Map<Precision, CudaTensorOps> own, Map<Precision, CudaTensorOps> lib,
                                 List<Map<String, Object>> accuracy, List<String> errors, Arena arena) {
        int tokens = 64;
        for (int[] shape : SHAPES) {
            int in = shape[0];
            int outF = shape[1];
            Activation act = outF == 3072 ? Activation.GELU : Activation.NONE;
            double[] ref = new double[tokens * outF];
            double refMax = 0;
            for (int r = 0; r < tokens; r++) {
                for (int o = 0; o < outF; o++) {
                    double acc = hostB.getAtIndex(ValueLayout.JAVA_FLOAT, o);
                    for (int k = 0; k < in; k++) {
                        acc += (double) hostX.getAtIndex(ValueLayout.JAVA_FLOAT, (long) r * in + k)
                                * hostW.getAtIndex(ValueLayout.JAVA_FLOAT, (long) o * in + k);
                    }
                    if (act == Activation.GELU) {
                        acc = 0.5 * acc * (1 + erf(acc / Math.sqrt(2)));
                    }
                    ref[r * outF + o] = acc;
                    refMax = Math.max(refMax, Math.abs(acc));
                }
            }
            for (String engine : List.of("cublaslt", "own")) {
                for (Precision p : own.keySet()) {
                    CudaTensorOps ops = engine.equals("own") ? own.get(p) : lib.get(p);
                    if (ops == null) {
                        continue;
                    }
                    Map<String, Object> row = new LinkedHashMap<>();
                    row.put("engine", engine);
                    row.put("precision", p.name());
                    row.put("tokens", tokens);
                    row.put("in", in);
                    row.put("out", outF);
                    row.put("activation", act.name());
                    try {
                        boolean bf16 = ops.activationBytes() == 2;
                        upload(stream, hostX, hostW, hostB, x, w, bias, bf16, arena, (long) tokens * 3072);
                        ops.linear(stream, x.address(), w.address(), bias.address(), y.address(), tokens, in, outF, act);
                        long count = (long) tokens * outF;
                        MemorySegment result = arena.allocate(count * 4, 64);
                        if (bf16) {
                            ops.toFloat32(stream, y.address(), x.address(), count);   // x is re-uploaded next time
                            stream.copyDeviceToHost(x.address(), result, count * 4);
                        } else {
                            stream.copyDeviceToHost(y.address(), result, count * 4);
                        }
                        stream.synchronize();
                        double maxErr = 0;
                        for (int i = 0; i < count; i++) {
                            maxErr = Math.max(maxErr, Math.abs(result.getAtIndex(ValueLayout.JAVA_FLOAT, i) - ref[i]));
                        }
                        row.put("max_abs_error", maxErr);
                        row.put("max_abs_reference", refMax);
                        row.put("relative_error", maxErr / refMax);
                    } catch (RuntimeException e) {
                        row.put("error", e.toString());
                        errors.add("accuracy " + engine + " " + p + " " + in + "->" + outF + ": " + e);
                    }
                    accuracy.add(row);
                    System.out.println("[gemm-bench] " + row);
                }
            }
        }
    }

    /** Uploads x (its first {@code floats} values), w and bias as FP32 or, for bf16 activations, as bf16. */
    private static void upload(DeviceStream stream, MemorySegment hostX, MemorySegment hostW, MemorySegment hostB,
                               DeviceBlock x, DeviceBlock w, DeviceBlock bias, boolean bf16, Arena arena, long floats) {
        if (!bf16) {
            stream.copyHostToDevice(hostX, x.address(), floats * 4);
            stream.copyHostToDevice(hostW, w.address(), hostW.byteSize());
            stream.copyHostToDevice(hostB, bias.address(), hostB.byteSize());
        } else {
            stream.copyHostToDevice(toBf16(hostX, floats, arena), x.address(), floats * 2);
            stream.copyHostToDevice(toBf16(hostW, hostW.byteSize() / 4, arena), w.address(), hostW.byteSize() / 2);
            stream.copyHostToDevice(toBf16(hostB, hostB.byteSize() / 4, arena), bias.address(), hostB.byteSize() / 2);
        }
        stream.synchronize();
    }

    private static MemorySegment toBf16(MemorySegment floats, long count, Arena arena) {
        MemorySegment out = arena.allocate(count * 2, 64);
        for (long i = 0; i < count; i++) {
            out.setAtIndex(ValueLayout.JAVA_SHORT, i, io.gpupool.model.Bf16.fromFloat(
                    floats.getAtIndex(ValueLayout.JAVA_FLOAT, i)));
        }
        return out;
    }

    private static void fill(MemorySegment segment, Random random, float scale) {
        long n = segment.byteSize() / 4;
        for (long i = 0; i < n; i++) {
            segment.setAtIndex(ValueLayout.JAVA_FLOAT, i, (float) (random.nextGaussian() * scale));
        }
    }

    /** erf by Abramowitz–Stegun 7.1.26 refined: enough (1e-7) for a reference GELU at these magnitudes. */
    static double erf(double z) {
        double t = 1.0 / (1.0 + 0.5 * Math.abs(z));
        double ans = 1 - t * Math.exp(-z * z - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418
                + t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587
                + t * (-0.82215223 + t * 0.17087277)))))))));
        return z >= 0 ? ans : -ans;
    }
}
