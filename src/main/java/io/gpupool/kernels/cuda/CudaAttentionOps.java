package io.gpupool.kernels.cuda;

import io.gpupool.backend.DeviceStream;
import io.gpupool.backend.KernelFunction;
import io.gpupool.backend.KernelModule;

import static io.gpupool.kernels.cuda.KernelLauncher.ceilDiv;
import static io.gpupool.kernels.cuda.KernelLauncher.passBlocks;
import static io.gpupool.kernels.cuda.KernelLauncher.pointer;
import static io.gpupool.kernels.cuda.KernelLauncher.positive;

/**
 * Self-attention over padded batches for {@link CudaTensorOps} ({@code src/main/cuda/attention.cu}): which kernel
 * runs for a precision, a head size, the activation type and the kernel generation, and the workspace the bf16
 * fallback needs. Every kernel is fused (online softmax), so attention needs no workspace, except on bf16
 * activations with a head size other than 64 (below).
 *
 * <pre>
 *   kernel                                        grid                       block
 *   FP32 activations
 *     attention/attention_d{32,64,128}            (⌈seq/32⌉, heads, batch)   128   FP32, by head size
 *     attention/attention_d64_tiled               (⌈seq/64⌉, heads, batch)   128   FP32, head size 64, TILED
 *     attention/attention_bf16_d64                (⌈seq/64⌉, heads, batch)   128   BF16 and head size 64
 *     attention/attention_tf32_d64                (⌈seq/64⌉, heads, batch)   128   TF32 and head size 64
 *   bf16 activations
 *     attention/attention_bf16io_d64              (⌈seq/64⌉, heads, batch)   128   CLASSIC
 *     attention/flash_attention_bf16io_d64_q128w8 (⌈seq/128⌉, heads, batch)  256   TILED, at least
 *                                                                                  FLASH_WIDE_MIN_BLOCKS such blocks
 *     attention/flash_attention_bf16io_d64_q64    (⌈seq/64⌉, heads, batch)   128   TILED, fewer
 *     other head sizes: ops/bf16_to_f32, the FP32 kernel in the workspace, ops/f32_to_bf16
 * </pre>
 *
 * <h2>Precision</h2>
 * Attention computes in FP32, except with head size 64 (BERT-base and most BERT-family models) under
 * {@link Precision#BF16}, where a tensor-core kernel rounds Q, K, V and the probabilities to bf16, and under
 * {@link Precision#TF32}, where one rounds them to TF32 (FP32 softmax and accumulation in both). The TF32 one is
 * turned off (FP32 attention under TF32) with {@code -Dgpupool.kernels.tf32Attention=false}.
 * {@link Precision#TF32X3} and {@link Precision#FP32} always use the FP32 kernels. On bf16 activations attention
 * reads bf16 QKV and writes bf16 context; for other head sizes than 64 QKV is widened into the attention
 * workspace, the FP32 kernel runs there and the context is narrowed back.
 *
 * <h2>Kernel generations</h2>
 * {@link AttentionKernels} picks between two generations of the head-size-64 kernels (same inputs, outputs and
 * masking, both fused): CLASSIC, where each thread computes one score at a time (FP32) or a warp reloads every K and
 * V fragment for its 16 queries and waits for each tile's loads (bf16); and TILED, where FP32 threads keep 4×4
 * blocks of scores in registers and the bf16 kernel streams K and V with cp.async behind the math, skips key tiles
 * of padding only, and on large grids shares each K/V tile among 8 warps (128 queries) (src/main/cuda/attention.cu
 * explains both). TILED is the default; other head sizes always run the classic kernels.
 */
final class CudaAttentionOps {

    /**
     * Fewer 128-query flash blocks than this and bf16 attention runs 64-query blocks instead. Below about one block
     * per multiprocessor pair the device is latency-bound and the smaller blocks, twice as many, finish first; from
     * here on the 8-warp blocks win, since they load each K/V tile once for 128 queries (measurements:
     * docs/benchmarks.md, "Validation call").
     */
    static final int FLASH_WIDE_MIN_BLOCKS = 96;

    private final Precision precision;
    private final boolean tf32Attention;
    private final AttentionKernels attentionKernels;
    private final boolean bf16Activations;
    private final KernelLauncher launcher;
    private final KernelFunction attention32;
    private final KernelFunction attention64;
    private final KernelFunction attention128;
    private final KernelFunction attentionBf16;
    private final KernelFunction attentionTf32;
    private final KernelFunction attentionBf16io;
    private final KernelFunction attentionTiled;
    private final KernelFunction flashNarrow;
    private final KernelFunction flashWide;
    private final KernelFunction bf16ToF32;
    private final KernelFunction f32ToBf16;

    /** The kernels of {@code attention} (and the conversions of {@code ops}) for these settings. */
    CudaAttentionOps(KernelModule attention, KernelModule ops, Precision precision, boolean tf32Attention,
                     AttentionKernels attentionKernels, boolean bf16Activations, KernelLauncher launcher) {
        this.precision = precision;
        this.tf32Attention = tf32Attention;
        this.attentionKernels = attentionKernels;
        this.bf16Activations = bf16Activations;
        this.launcher = launcher;
        attention32 = attention.function("attention_d32");
        attention64 = attention.function("attention_d64");
        attention128 = attention.function("attention_d128");
        attentionBf16 = attention.function("attention_bf16_d64");
        attentionTf32 = attention.function("attention_tf32_d64");
        attentionBf16io = attention.function("attention_bf16io_d64");
        attentionTiled = attention.function("attention_d64_tiled");
        flashNarrow = attention.function("flash_attention_bf16io_d64_q64");
        flashWide = attention.function("flash_attention_bf16io_d64_q128w8");
        bf16ToF32 = ops.function("bf16_to_f32");
        f32ToBf16 = ops.function("f32_to_bf16");
    }

    /** Bytes of workspace {@link #attention} needs for this shape: FP32 QKV and context where bf16 is widened. */
    long workspaceBytes(int batch, int seq, int heads, int headDim) {
        if (bf16Activations && headDim != 64) {
            return 4L * batch * seq * heads * headDim * Float.BYTES;   // FP32 qkv (3 parts) and FP32 context
        }
        return 0;
    }

    void attention(DeviceStream stream, long qkv, long attentionMask, long workspace, long context, int batch,
                   int seq, int heads, int headDim) {
        positive("batch", batch);
        positive("seq", seq);
        positive("heads", heads);
        positive("headDim", headDim);
        pointer("qkv", qkv);
        pointer("context", context);
        if (heads > 65535 || batch > 65535) {
            throw new IllegalArgumentException("heads (" + heads + ") and batch (" + batch + ") must be at most 65535");
        }
        if (bf16Activations && headDim != 64) {
            // no bf16 kernel for this head size: widen QKV into the workspace, FP32 attention there, narrow back
            pointer("workspace", workspace);
            long width = (long) batch * seq * heads * headDim;
            long wideQkv = workspace;
            long wideContext = workspace + 3 * width * Float.BYTES;
            launcher.launch(stream, bf16ToF32, passBlocks(3 * width), 1, 1, 256, 1, 1, 0, qkv, wideQkv, 3 * width);
            fp32Attention(stream, wideQkv, attentionMask, wideContext, batch, seq, heads, headDim);
            launcher.launch(stream, f32ToBf16, passBlocks(width), 1, 1, 256, 1, 1, 0, wideContext, context, width);
            return;
        }
        if (bf16Activations && attentionKernels == AttentionKernels.TILED) {
            boolean wide = (long) ceilDiv(seq, 128) * heads * batch >= FLASH_WIDE_MIN_BLOCKS;
            launcher.launch(stream, wide ? flashWide : flashNarrow, ceilDiv(seq, wide ? 128 : 64), heads, batch,
                    wide ? 256 : 128, 1, 1, 0, qkv, attentionMask, context, seq, heads);
            return;
        }
        if (bf16Activations) {
            launcher.launch(stream, attentionBf16io, ceilDiv(seq, 64), heads, batch, 128, 1, 1, 0, qkv, attentionMask,
                    context, seq, heads);
            return;
        }
        boolean tensorCores = precision == Precision.BF16 || precision == Precision.TF32 && tf32Attention;
        if (tensorCores && headDim == 64 && (qkv & 15) == 0) {
            launcher.launch(stream, precision == Precision.BF16 ? attentionBf16 : attentionTf32, ceilDiv(seq, 64),
                    heads, batch, 128, 1, 1, 0, qkv, attentionMask, context, seq, heads);
            return;
        }
        fp32Attention(stream, qkv, attentionMask, context, batch, seq, heads, headDim);
    }

    private void fp32Attention(DeviceStream stream, long qkv, long attentionMask, long context, int batch, int seq,
                               int heads, int headDim) {
        if (headDim == 64 && attentionKernels == AttentionKernels.TILED && (qkv & 15) == 0 && (context & 15) == 0) {
            launcher.launch(stream, attentionTiled, ceilDiv(seq, 64), heads, batch, 128, 1, 1, 0, qkv, attentionMask,
                    context, seq, heads);
            return;
        }
        KernelFunction kernel;
        if (headDim <= 32) {
            kernel = attention32;
        } else if (headDim <= 64) {
            kernel = attention64;
        } else if (headDim <= 128) {
            kernel = attention128;
        } else {
            throw new IllegalArgumentException("headDim " + headDim + " is not supported by the CUDA attention "
                    + "kernels (at most 128)");
        }
        launcher.launch(stream, kernel, ceilDiv(seq, 32), heads, batch, 128, 1, 1, 0,
                qkv, attentionMask, context, seq, heads, headDim);
    }
}
