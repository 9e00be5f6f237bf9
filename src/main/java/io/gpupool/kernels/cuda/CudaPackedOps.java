package io.gpupool.kernels.cuda;

import io.gpupool.backend.ComputeDevice;
import io.gpupool.backend.DeviceStream;
import io.gpupool.backend.KernelFunction;
import io.gpupool.backend.KernelModule;
import io.gpupool.kernels.TensorOps.Pooling;

/**
 * The packed-sequence ops of {@link io.gpupool.kernels.TensorOps} on CUDA: the kernels of
 * {@code src/main/cuda/packed.cu} ({@code /ptx/packed.ptx}), used by {@link CudaTensorOps}; FP32, or on bf16
 * activations their {@code _bf16} forms (FP32 arithmetic, bf16 loads and stores).
 *
 * <pre>
 *   op                        kernel (FP32 | bf16 activations)                 grid               block
 *   packedEmbeddingSum        packed/packed_embedding_sum | -                  (tokens)           ≤256
 *   packedEmbeddingLayerNorm  - | packed/packed_embedding_layer_norm_bf16      (tokens)           ≤256
 *   varlenAttention           packed/varlen_attention[_bf16]                   (sequences, heads) 128 (4 warps)
 *   packedPool                packed/packed_pool_{cls,mean}[_bf16]             (sequences)        ≤256
 * </pre>
 * The attention kernel keeps a tile of 32 keys and values in static shared memory sized for a head of at
 * most {@link #MAX_HEAD_DIM}; it needs no workspace. The bf16 forms are not yet verified on a GPU (see
 * {@code BertBatchingGpuTest}); {@link CudaTensorOps} uses them only where {@code gpupool.kernels.packed-bf16} asks.
 */
final class CudaPackedOps {

    /** Largest head size varlen_attention handles (VA_MAX_HEAD_DIM in packed.cu). */
    static final int MAX_HEAD_DIM = 128;
    private static final int ATTENTION_THREADS = 128;

    private final boolean bf16;
    private final KernelFunction embeddingSum;
    private final KernelFunction embeddingLayerNormBf16;
    private final KernelFunction attention;
    private final KernelFunction poolCls;
    private final KernelFunction poolMean;

    /** @param bf16 whether activations are bf16 (then attention and pooling take the {@code _bf16} kernels) */
    CudaPackedOps(ComputeDevice device, boolean bf16) {
        this.bf16 = bf16;
        KernelModule packed = device.loadModule("packed", KernelLauncher.ptx("packed"));
        String suffix = bf16 ? "_bf16" : "";
        embeddingSum = packed.function("packed_embedding_sum");
        embeddingLayerNormBf16 = packed.function("packed_embedding_layer_norm_bf16");
        attention = packed.function("varlen_attention" + suffix);
        poolCls = packed.function("packed_pool_cls" + suffix);
        poolMean = packed.function("packed_pool_mean" + suffix);
    }

    void embeddingSum(DeviceStream stream, long inputIds, long tokenTypeIds, long positionIds, long wordTable,
                      long positionTable, long tokenTypeTable, long out, int tokens, int hidden) {
        checkEmbeddings(inputIds, positionIds, wordTable, positionTable, tokenTypeTable, out, tokens, hidden);
        stream.launch(embeddingSum, tokens, 1, 1, KernelLauncher.rowBlock(hidden), 1, 1, 0,
                inputIds, tokenTypeIds, positionIds, wordTable, positionTable, tokenTypeTable, out, hidden);
    }

    /** bf16 activations only: the FP32 sum and LayerNorm of every packed row, stored as bf16 once. */
    void embeddingLayerNormBf16(DeviceStream stream, long inputIds, long tokenTypeIds, long positionIds,
                                long wordTable, long positionTable, long tokenTypeTable, long gamma, long beta,
                                long out, int tokens, int hidden, float eps) {
        if (!bf16) {
            throw new IllegalStateException("packed_embedding_layer_norm_bf16 writes bf16; these ops hold FP32");
        }
        checkEmbeddings(inputIds, positionIds, wordTable, positionTable, tokenTypeTable, out, tokens, hidden);
        pointer("gamma", gamma);
        pointer("beta", beta);
        stream.launch(embeddingLayerNormBf16, tokens, 1, 1, KernelLauncher.rowBlock(hidden), 1, 1, 0,
                inputIds, tokenTypeIds, positionIds, wordTable, positionTable, tokenTypeTable, gamma, beta, out, hidden,
                eps);
    }

    void attention(DeviceStream stream, long qkv, long attentionMask, long offsets, long context, int sequences,
                   int heads, int headDim) {
        positive("sequences", sequences);
        positive("heads", heads);
        positive("headDim", headDim);
        if (headDim > MAX_HEAD_DIM) {
            throw new IllegalStateException("varlen_attention handles heads of at most " + MAX_HEAD_DIM
                    + " dimensions, got " + headDim);
        }
        pointer("qkv", qkv);
        pointer("offsets", offsets);
        pointer("context", context);
        stream.launch(attention, sequences, heads, 1, ATTENTION_THREADS, 1, 1, 0,
                qkv, attentionMask, offsets, context, heads, headDim, (float) (1.0 / Math.sqrt(headDim)));
    }

    void pool(DeviceStream stream, long hidden, long attentionMask, long offsets, long out, int sequences, int cols,
              Pooling pooling) {
        positive("sequences", sequences);
        positive("cols", cols);
        pointer("hidden", hidden);
        pointer("offsets", offsets);
        pointer("out", out);
        if (pooling == Pooling.CLS) {
            stream.launch(poolCls, sequences, 1, 1, KernelLauncher.rowBlock(cols), 1, 1, 0, hidden, offsets, out, cols);
        } else {
            stream.launch(poolMean, sequences, 1, 1, KernelLauncher.rowBlock(cols), 1, 1, 0,
                    hidden, attentionMask, offsets, out, cols);
        }
    }

    /** The arguments both embedding kernels read; the token types may be null (type 0). */
    private static void checkEmbeddings(long inputIds, long positionIds, long wordTable, long positionTable,
                                        long tokenTypeTable, long out, int tokens, int hidden) {
        positive("tokens", tokens);
        positive("hidden", hidden);
        pointer("inputIds", inputIds);
        pointer("positionIds", positionIds);
        pointer("wordTable", wordTable);
        pointer("positionTable", positionTable);
        pointer("tokenTypeTable", tokenTypeTable);
        pointer("out", out);
    }

    private static void positive(String name, int value) {
        if (value < 1) {
            throw new IllegalArgumentException(name + " must be positive, was " + value);
        }
    }

    private static void pointer(String name, long address) {
        if (address == 0) {
            throw new IllegalArgumentException(name + " must not be a null device pointer");
        }
    }
}
