package io.gpupool.lab;

import io.gpupool.backend.ComputeDevice;
import io.gpupool.backend.DeviceStream;
import io.gpupool.backend.MatmulLibrary;
import io.gpupool.backend.cuda.CudaBackend;
import io.gpupool.kernels.cuda.CudaTensorOps;
import io.gpupool.kernels.cuda.KernelOptions;
import io.gpupool.kernels.cuda.Precision;
import io.gpupool.memory.PoolConfig;
import io.gpupool.memory.pool.DevicePool;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * BERT-base's two output projections with their post-norm ({@code linearAddLayerNorm}) on cuBLASLt, with the
 * residual added in the GEMM ({@code gpupool.kernels.residual-in-gemm}) and without (added in the LayerNorm), warp
 * LayerNorm on in both: what decides that setting's default. Shapes: 128 and 16 384 token rows (1×128, 32×512),
 * 768 → 768 (attention output) and 3072 → 768 (FFN output), FP32 and BF16.
 *
 * <p>Timing: warm-up, then {@code reps} calls enqueued back to back and one synchronisation, median of 5 such samples,
 * per call (at 16 384 rows the device time; at 128 rows mostly the two enqueues). Inputs are a constant byte pattern
 * (0x3C: about 0.0115 in both types), which does not change the work.
 *
 * <pre>
 *   run-gpu-tests.sh --main io.gpupool.lab.ResidualGemmBench OUT.json [reps, default 20]
 * </pre>
 */
public final class ResidualGemmBench {

    private ResidualGemmBench() {
    }

    public static void main(String[] args) {
        Path out = Path.of(args.length > 0 ? args[0] : "residual-gemm-bench.json");
        int reps = args.length > 1 ? Integer.parseInt(args[1]) : 20;
        CudaBackend backend = CudaBackend.tryCreate().orElseThrow(() -> new IllegalStateException("no CUDA device"));
        Map<String, Object> doc = new LinkedHashMap<>();
        List<Map<String, Object>> rows = new ArrayList<>();
        doc.put("bench", "residual_gemm");
        doc.put("reps", reps);
        doc.put("rows", rows);
        try (backend) {
            ComputeDevice device = backend.devices().getFirst();
            device.bindToCurrentThread();
            doc.put("device", device.name());
            MatmulLibrary library = device.matmulLibrary(null).orElseThrow(() ->
                    new IllegalStateException("cuBLASLt could not be loaded"));
            doc.put("gemm_library", library.description());
            DevicePool pool = new DevicePool(device.chunkSource(), PoolConfig.defaults());
            DeviceStream stream = device.createStream(0);
            List<long[]> blocks = new ArrayList<>();
            try {
                for (Precision precision : List.of(Precision.BF16, Precision.FP32)) {
                    CudaTensorOps unfused = new CudaTensorOps(device, precision, library, pool, KernelOptions.DEFAULT);
                    CudaTensorOps fused = new CudaTensorOps(device, precision, library, pool,
                            new KernelOptions(false, true, true));
                    try {
                        int elem = unfused.activationBytes();
                        for (int tokens : new int[] {128, 16384}) {
                            for (int in : new int[] {768, 3072}) {
                                int outCols = 768;
                                long x = filled(device, stream, blocks, (long) tokens * in * elem);
                                long w = filled(device, stream, blocks, (long) outCols * in * elem);
                                long bias = filled(device, stream, blocks, (long) outCols * elem);
                                long residual = filled(device, stream, blocks, (long) tokens * outCols * elem);
                                long gamma = filled(device, stream, blocks, (long) outCols * Float.BYTES);
                                long beta = filled(device, stream, blocks, (long) outCols * Float.BYTES);
                                long y = filled(device, stream, blocks, (long) tokens * outCols * elem);
                                double[] ms = new double[2];
                                for (int variant = 0; variant < 2; variant++) {
                                    CudaTensorOps ops = variant == 0 ? unfused : fused;
                                    Runnable call = () -> ops.linearAddLayerNorm(stream, x, w, bias, residual, gamma,
                                            beta, y, tokens, in, outCols, 1e-12f);
                                    ms[variant] = medianMs(stream, call, reps);
                                }
                                Map<String, Object> row = new LinkedHashMap<>();
                                row.put("precision", precision.name());
                                row.put("tokens", tokens);
                                row.put("in", in);
                                row.put("out", outCols);
                                row.put("unfused_ms", round(ms[0]));
                                row.put("fused_ms", round(ms[1]));
                                row.put("unfused_over_fused", round(ms[0] / ms[1]));
                                rows.add(row);
                                System.err.println("[residual-bench] " + row);
                                BertGpuBench.write(out, doc);
                            }
                        }
                    } finally {
                        stream.synchronize();
                        unfused.close();
                        fused.close();
                    }
                }
            } finally {
                stream.synchronize();
                for (long[] block : blocks) {
                    device.chunkSource().free(block[0], block[1]);
                }
                stream.close();
                pool.close();
            }
        }
        doc.put("status", "complete");
        BertGpuBench.write(out, doc);
    }

    private static long filled(ComputeDevice device, DeviceStream stream, List<long[]> blocks, long bytes) {
        long address = device.chunkSource().allocate(bytes);
        blocks.add(new long[] {address, bytes});
        stream.fill(address, (byte) 0x3C, bytes);
        return address;
    }

    private static double medianMs(DeviceStream stream, Runnable call, int reps) {
        for (int i = 0; i < 5; i++) {
            call.run();
        }
        stream.synchronize();
        double[] samples = new double[5];
        for (int s = 0; s < samples.length; s++) {
            long t0 = System.nanoTime();
            for (int i = 0; i < reps; i++) {
                call.run();
            }
            stream.synchronize();
            samples[s] = (System.nanoTime() - t0) / 1e6 / reps;
        }
        Arrays.sort(samples);
        return samples[samples.length / 2];
    }

    private static double round(double v) {
        return Math.round(v * 10_000) / 10_000.0;
    }
}
