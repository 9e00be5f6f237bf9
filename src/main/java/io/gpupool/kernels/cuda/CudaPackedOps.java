package io.gpupool.kernels.cuda;

import io.gpupool.backend.ComputeDevice;
import io.gpupool.backend.DeviceStream;
import io.gpupool.backend.KernelFunction;
import io.gpupool.backend.KernelModule;
import io.gpupool.kernels.TensorOps.Pooling;

/**
 * The packed-sequence ops of {@link io.gpupool.kernels.TensorOps} on CUDA: the FP32 kernels of
 * {@code src/main/cuda/packed.cu} ({@code /ptx/packed.ptx}), used by {@link CudaTensorOps}.
 *
 * <pre>
 *   op                  kernel                          grid              block
 *   packedEmbeddingSum  packed/packed_embedding_sum     (tokens)          ≤256
 *   varlenAttention     packed/varlen_attention         (sequences, heads) 128 (4 warps, one query each)
 *   packedPool          packed/packed_pool_{cls,mean}   (sequences)       ≤256
 * </pre>
 * The attention kernel keeps a tile of 32 keys and values in static shared memory sized for a head of at
 * most {@link #MAX_HEAD_DIM}; it needs no workspace.
 */
final class CudaPackedOps {

    /** Largest head size varlen_attention handles (VA_MAX_HEAD_DIM in packed.cu). */
    static final int MAX_HEAD_DIM = 128;
    private static final int ATTENTION_THREADS = 128;

    private final KernelFunction embeddingSum;
    private final KernelFunction attention;
    private final KernelFunction poolCls;
    private final KernelFunction poolMean;

    CudaPackedOps(ComputeDevice device) {
        KernelModule packed = device.loadModule("packed", CudaTensorOps.ptx("packed"));
        embeddingSum = packed.function("packed_embedding_sum");
        attention = packed.function("varlen_attention");
        poolCls = packed.function("packed_pool_cls");
        poolMean = packed.function("packed_pool_mean");
    }

    void embeddingSum(DeviceStream stream, long inputIds, long tokenTypeIds, long positionIds, long wordTable,
                      long positionTable, long tokenTypeTable, long out, int tokens, int hidden) {
        positive("tokens", tokens);
        positive("hidden", hidden);
        pointer("inputIds", inputIds);
        pointer("positionIds", positionIds);
        pointer("wordTable", wordTable);
        pointer("positionTable", positionTable);
        pointer("tokenTypeTable", tokenTypeTable);
        pointer("out", out);
        stream.launch(embeddingSum, tokens, 1, 1, CudaTensorOps.rowBlock(hidden), 1, 1, 0,
                inputIds, tokenTypeIds, positionIds, wordTable, positionTable, tokenTypeTable, out, hidden);
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
            stream.launch(poolCls, sequences, 1, 1, CudaTensorOps.rowBlock(cols), 1, 1, 0, hidden, offsets, out, cols);
        } else {
            stream.launch(poolMean, sequences, 1, 1, CudaTensorOps.rowBlock(cols), 1, 1, 0,
                    hidden, attentionMask, offsets, out, cols);
        }
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
