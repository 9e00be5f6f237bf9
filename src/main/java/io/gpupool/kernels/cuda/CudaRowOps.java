package io.gpupool.kernels.cuda;

import io.gpupool.backend.DeviceStream;
import io.gpupool.backend.KernelFunction;
import io.gpupool.backend.KernelModule;
import io.gpupool.kernels.TensorOps.Pooling;

import java.util.Objects;

import static io.gpupool.kernels.cuda.KernelLauncher.ceilDiv;
import static io.gpupool.kernels.cuda.KernelLauncher.passBlocks;
import static io.gpupool.kernels.cuda.KernelLauncher.pointer;
import static io.gpupool.kernels.cuda.KernelLauncher.positive;
import static io.gpupool.kernels.cuda.KernelLauncher.positiveEps;
import static io.gpupool.kernels.cuda.KernelLauncher.rowBlock;

/**
 * The row-wise ops of {@link CudaTensorOps} over padded batches ({@code src/main/cuda/ops.cu}): embeddings (with
 * their LayerNorm), add+LayerNorm, pooling and softmax, one row (a token) per block or, for the LayerNorms, per
 * warp; and the widening of bf16 outputs to FP32. They always compute in FP32; on bf16 activations they read and
 * write bf16 with FP32 statistics (embedding tables and LayerNorm parameters stay FP32).
 *
 * <pre>
 *   op                  kernel (FP32 | bf16 activations)                      grid          block
 *   embeddingSum        ops/embedding_sum | -                                 (batch·seq)   ≤256
 *   embeddingLayerNorm  ops/embedding_layer_norm | _bf16                      (batch·seq)   ≤256
 *                       ops/embedding_layer_norm_warp | _warp_bf16            (batch·seq)   32    warp rows (below)
 *   addLayerNorm        ops/add_layer_norm                                    (rows)        ≤256
 *                       | ops/add_layer_norm_bf16_reg                         (rows)        ≤256  cols ≤ 8·threads:
 *                                                                               x + residual kept in registers,
 *                                                                               read once
 *                       | ops/add_layer_norm_bf16                             (rows)        ≤256  longer rows
 *                       ops/add_layer_norm_warp | _warp_bf16                  (rows)        32    warp rows (below)
 *   pool                ops/pool_cls | pool_mean, or their _bf16 forms        (batch)       ≤256
 *   softmax             ops/softmax_rows | -                                  (rows)        ≤256
 *   toFloat32           a device copy | ops/bf16_to_f32                       (≤1024 grid-stride) 256
 * </pre>
 * Warp rows: with {@code Options.warpLayerNorm}, a row that is a whole number of 32-lane chunks of 16-byte
 * vectors (cols a multiple of 128 up to 1024 in FP32, of 256 up to 2048 in bf16) with every pointer 16-byte
 * aligned runs on the warp-per-row kernels (16-byte loads, the row in registers).
 */
final class CudaRowOps {

    /** Columns per thread that {@code add_layer_norm_bf16_reg} keeps in registers (its PER_THREAD). */
    static final int LAYER_NORM_REGISTER_COLUMNS = 8;
    /**
     * Threads per block of the warp-per-row LayerNorm kernels: one row a block, the block size that measured best
     * of 32/64/128/256 at both large and small row counts (docs/benchmarks.md, "LayerNorm kernels").
     */
    static final int WARP_ROW_BLOCK = 32;
    /** Chunks of 32 16-byte vectors a warp-per-row LayerNorm keeps in registers (GP_WARP_LN_MAX_CHUNKS of ops.cu). */
    static final int WARP_LAYER_NORM_MAX_CHUNKS = 8;

    private final boolean bf16Activations;
    /** {@code Options.warpLayerNorm()}. */
    private final boolean warpLayerNorm;
    private final KernelLauncher launcher;
    private final KernelFunction embeddingSum;
    private final KernelFunction addLayerNorm;
    private final KernelFunction poolCls;
    private final KernelFunction poolMean;
    private final KernelFunction softmaxRows;
    private final KernelFunction embeddingLayerNorm;
    private final KernelFunction embeddingLayerNormBf16;
    private final KernelFunction addLayerNormBf16;
    private final KernelFunction addLayerNormBf16Reg;
    private final KernelFunction poolClsBf16;
    private final KernelFunction poolMeanBf16;
    private final KernelFunction bf16ToF32;
    private final KernelFunction addLayerNormWarp;
    private final KernelFunction addLayerNormWarpBf16;
    private final KernelFunction embeddingLayerNormWarp;
    private final KernelFunction embeddingLayerNormWarpBf16;

    /** The kernels of {@code ops} for FP32 or bf16 activations, on the warp-per-row LayerNorms where asked. */
    CudaRowOps(KernelModule ops, boolean bf16Activations, boolean warpLayerNorm, KernelLauncher launcher) {
        this.bf16Activations = bf16Activations;
        this.warpLayerNorm = warpLayerNorm;
        this.launcher = launcher;
        embeddingSum = ops.function("embedding_sum");
        addLayerNorm = ops.function("add_layer_norm");
        poolCls = ops.function("pool_cls");
        poolMean = ops.function("pool_mean");
        softmaxRows = ops.function("softmax_rows");
        embeddingLayerNorm = ops.function("embedding_layer_norm");
        embeddingLayerNormBf16 = ops.function("embedding_layer_norm_bf16");
        addLayerNormBf16 = ops.function("add_layer_norm_bf16");
        addLayerNormBf16Reg = ops.function("add_layer_norm_bf16_reg");
        poolClsBf16 = ops.function("pool_cls_bf16");
        poolMeanBf16 = ops.function("pool_mean_bf16");
        bf16ToF32 = ops.function("bf16_to_f32");
        addLayerNormWarp = ops.function("add_layer_norm_warp");
        addLayerNormWarpBf16 = ops.function("add_layer_norm_warp_bf16");
        embeddingLayerNormWarp = ops.function("embedding_layer_norm_warp");
        embeddingLayerNormWarpBf16 = ops.function("embedding_layer_norm_warp_bf16");
    }

    void embeddingSum(DeviceStream stream, long inputIds, long tokenTypeIds, long wordTable, long positionTable,
                      long tokenTypeTable, long out, int batch, int seq, int hidden) {
        if (bf16Activations) {
            throw new UnsupportedOperationException("embeddingSum writes FP32; on bf16 activations use "
                    + "embeddingLayerNorm");
        }
        checkEmbeddings(inputIds, wordTable, positionTable, tokenTypeTable, batch, seq, hidden);
        pointer("out", out);
        launcher.launch(stream, embeddingSum, Math.multiplyExact(batch, seq), 1, 1, rowBlock(hidden), 1, 1, 0,
                inputIds, tokenTypeIds, wordTable, positionTable, tokenTypeTable, out, seq, hidden);
    }

    void embeddingLayerNorm(DeviceStream stream, long inputIds, long tokenTypeIds, long wordTable, long positionTable,
                            long tokenTypeTable, long gamma, long beta, long out, int batch, int seq, int hidden,
                            float eps) {
        checkEmbeddings(inputIds, wordTable, positionTable, tokenTypeTable, batch, seq, hidden);
        pointer("gamma", gamma);
        pointer("beta", beta);
        pointer("out", out);
        positiveEps(eps);
        int tokens = Math.multiplyExact(batch, seq);
        if (warpRows(hidden, wordTable | positionTable | tokenTypeTable | gamma | beta | out)) {
            launcher.launch(stream, bf16Activations ? embeddingLayerNormWarpBf16 : embeddingLayerNormWarp,
                    ceilDiv(tokens, WARP_ROW_BLOCK / 32), 1, 1, WARP_ROW_BLOCK, 1, 1, 0, inputIds, tokenTypeIds,
                    wordTable, positionTable, tokenTypeTable, gamma, beta, out, tokens, seq, hidden, eps);
            return;
        }
        launcher.launch(stream, bf16Activations ? embeddingLayerNormBf16 : embeddingLayerNorm, tokens,
                1, 1, rowBlock(hidden), 1, 1, 0, inputIds, tokenTypeIds, wordTable, positionTable, tokenTypeTable,
                gamma, beta, out, seq, hidden, eps);
    }

    /** The inputs both embedding ops read (the token types may be 0), checked before their own arguments. */
    private static void checkEmbeddings(long inputIds, long wordTable, long positionTable, long tokenTypeTable,
                                        int batch, int seq, int hidden) {
        positive("batch", batch);
        positive("seq", seq);
        positive("hidden", hidden);
        pointer("inputIds", inputIds);
        pointer("wordTable", wordTable);
        pointer("positionTable", positionTable);
        pointer("tokenTypeTable", tokenTypeTable);
    }

    void toFloat32(DeviceStream stream, long source, long destination, long count) {
        pointer("source", source);
        pointer("destination", destination);
        if (count <= 0) {
            throw new IllegalArgumentException("count must be positive, got " + count);
        }
        if (!bf16Activations) {
            stream.copyDeviceToDevice(source, destination, count * Float.BYTES);
            return;
        }
        launcher.launch(stream, bf16ToF32, passBlocks(count), 1, 1, 256, 1, 1, 0, source, destination, count);
    }

    void addLayerNorm(DeviceStream stream, long x, long residual, long gamma, long beta, long y, int rows, int cols,
                      float eps) {
        positive("rows", rows);
        positive("cols", cols);
        pointer("x", x);
        pointer("gamma", gamma);
        pointer("beta", beta);
        pointer("y", y);
        positiveEps(eps);
        if (warpRows(cols, x | residual | gamma | beta | y)) {
            launcher.launch(stream, bf16Activations ? addLayerNormWarpBf16 : addLayerNormWarp,
                    ceilDiv(rows, WARP_ROW_BLOCK / 32), 1, 1, WARP_ROW_BLOCK, 1, 1, 0, x, residual, gamma, beta, y,
                    rows, cols, eps);
            return;
        }
        KernelFunction kernel = !bf16Activations ? addLayerNorm
                : cols <= LAYER_NORM_REGISTER_COLUMNS * rowBlock(cols) ? addLayerNormBf16Reg : addLayerNormBf16;
        launcher.launch(stream, kernel, rows, 1, 1, rowBlock(cols), 1, 1, 0, x, residual, gamma, beta, y, cols, eps);
    }

    /**
     * Whether a LayerNorm over rows of {@code cols} runs on the warp-per-row kernels: opted in, the row a whole number
     * of 32-lane chunks of 16-byte vectors ({@code 16 / activation bytes} elements), at most
     * {@link #WARP_LAYER_NORM_MAX_CHUNKS} of them, and every pointer ({@code pointers} OR-ed) 16-byte aligned.
     */
    private boolean warpRows(int cols, long pointers) {
        if (!warpLayerNorm || (pointers & 15) != 0) {
            return false;
        }
        int chunk = 32 * (16 / (bf16Activations ? 2 : Float.BYTES));
        return cols % chunk == 0 && cols / chunk <= WARP_LAYER_NORM_MAX_CHUNKS;
    }

    void pool(DeviceStream stream, long hidden, long attentionMask, long out, int batch, int seq, int cols,
              Pooling pooling) {
        positive("batch", batch);
        positive("seq", seq);
        positive("cols", cols);
        pointer("hidden", hidden);
        pointer("out", out);
        switch (Objects.requireNonNull(pooling, "pooling")) {
            case CLS -> launcher.launch(stream, bf16Activations ? poolClsBf16 : poolCls, batch, 1, 1, rowBlock(cols),
                    1, 1, 0, hidden, out, seq, cols);
            case MEAN -> launcher.launch(stream, bf16Activations ? poolMeanBf16 : poolMean, batch, 1, 1,
                    rowBlock(cols), 1, 1, 0, hidden, attentionMask, out, seq, cols);
        }
    }

    void softmax(DeviceStream stream, long x, long y, int rows, int cols) {
        if (bf16Activations) {
            throw new UnsupportedOperationException("softmax runs on FP32 data only; these ops hold bf16 activations");
        }
        positive("rows", rows);
        positive("cols", cols);
        pointer("x", x);
        pointer("y", y);
        launcher.launch(stream, softmaxRows, rows, 1, 1, rowBlock(cols), 1, 1, 0, x, y, cols);
    }
}
