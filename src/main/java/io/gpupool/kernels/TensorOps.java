package io.gpupool.kernels;

import io.gpupool.backend.DeviceStream;

import java.util.List;
import java.util.Optional;

/**
 * The operations the models are built from, implemented once per backend (host Java, CUDA PTX).
 * Every pointer is a device address of row-major activations (FP32 unless {@link #activationBytes()} says 2:
 * bf16) unless stated otherwise; every call
 * enqueues on {@code stream} and returns without waiting. A pointer parameter documented as
 * optional may be 0.
 */
public interface TensorOps {

    /** Activation applied in a linear layer's epilogue. GELU is the erf form, as HuggingFace's "gelu". */
    enum Activation { NONE, GELU, RELU, TANH }

    /** How an encoder's token states become one vector per sequence. */
    enum Pooling { CLS, MEAN }

    /**
     * out[b, s, :] = word[ids[b, s]] + position[s] + tokenType[types[b, s]].
     * {@code inputIds} and {@code tokenTypeIds} are INT32 device arrays of batch × seq;
     * {@code tokenTypeIds} optional (type 0).
     */
    void embeddingSum(DeviceStream stream, long inputIds, long tokenTypeIds, long wordTable, long positionTable,
                      long tokenTypeTable, long out, int batch, int seq, int hidden);

    /**
     * Bytes of one activation element in device memory: 4 (FP32), or 2 where activations are held in bf16. The
     * weight and bias of {@link #linear} are stored in the same type; embedding tables and LayerNorm parameters are
     * always FP32.
     */
    default int activationBytes() {
        return Float.BYTES;
    }

    /**
     * Device scratch one stream's products may need before they are planned (the vendor library's per-stream
     * workspace bound); 0 where the products need none (gpupool's kernels, the host).
     */
    default long workspaceBound() {
        return 0;
    }

    /**
     * Device scratch the products run on {@code stream} since its workspace was last set by {@link #useWorkspace}
     * needed at most; at most {@link #workspaceBound()}. A graph capture asks it after a warm-up run of the forward,
     * to give that graph a workspace of exactly the size its own products use.
     */
    default long workspaceNeeded(DeviceStream stream) {
        return 0;
    }

    /**
     * From now on the products on {@code stream} use the {@code bytes} of scratch at {@code address} (memory the
     * caller holds) instead of a workspace of the stream's own, and none is allocated for it; 0 stops using it.
     * For graph capture: every captured graph needs scratch of its own, since graphs replay concurrently on
     * different serving streams, and a capturing stream must not allocate. Ignored where no scratch is needed.
     */
    default void useWorkspace(DeviceStream stream, long address, long bytes) {
    }

    /** Who multiplies the linear layers, for operators (e.g. "cuBLASLt 13.1.0", "gpupool kernels", "host"). */
    default String gemmEngine() {
        return "host";
    }

    /**
     * How each product shape measured at warm-up runs, for operators; empty where nothing was measured (the
     * setting off, or kernels with a single way to multiply).
     */
    default List<GemmChoice> gemmChoices() {
        return List.of();
    }

    /**
     * One measured product shape: {@code shape} names it ("128x768->3072 BF16 BIAS_GELU"), {@code engine} what runs
     * it (a library algorithm, or gpupool's kernels), {@code millis} its time per run, {@code heuristicMillis} that
     * of the library's own first choice (NaN where the library offered none), out of {@code candidates} measured.
     */
    record GemmChoice(String shape, String engine, double millis, double heuristicMillis, int candidates) {
    }

    /**
     * The per-stream scratch memory these kernels take from the pool (a library's workspace), for the owner of the
     * streams to release between requests; empty where the kernels keep none.
     */
    default Optional<StreamWorkspaces> workspaces() {
        return Optional.empty();
    }

    /**
     * These ops with FP32 activations, for models whose steps assume FP32 data: this instance unless
     * {@link #activationBytes()} is 2, else a sibling on the same device and precision that keeps FP32 activations.
     */
    default TensorOps fp32Activations() {
        return this;
    }

    /**
     * out = LayerNorm(embeddingSum(...)) · gamma + beta, in one pass where the backend fuses it; the default runs
     * {@link #embeddingSum} and then {@link #addLayerNorm} in place on {@code out}.
     */
    default void embeddingLayerNorm(DeviceStream stream, long inputIds, long tokenTypeIds, long wordTable,
                                    long positionTable, long tokenTypeTable, long gamma, long beta, long out,
                                    int batch, int seq, int hidden, float eps) {
        embeddingSum(stream, inputIds, tokenTypeIds, wordTable, positionTable, tokenTypeTable, out, batch, seq, hidden);
        addLayerNorm(stream, out, 0, gamma, beta, out, Math.multiplyExact(batch, seq), hidden, eps);
    }

    /**
     * Widens {@code count} activations at {@code source} into FP32 at {@code destination} (what a client receives);
     * with FP32 activations a device-to-device copy.
     */
    default void toFloat32(DeviceStream stream, long source, long destination, long count) {
        stream.copyDeviceToDevice(source, destination, count * Float.BYTES);
    }

    /** y[rows, out] = act(x[rows, in] · weight[out, in]ᵀ + bias[out]); {@code bias} optional. */
    void linear(DeviceStream stream, long x, long weight, long bias, long y, int rows, int in, int out,
                Activation activation);

    /** Scratch bytes {@link #attention} needs for these dimensions (may be 0). */
    long attentionWorkspaceBytes(int batch, int seq, int heads, int headDim);

    /**
     * Multi-head self-attention. {@code qkv} is [batch·seq, 3·heads·headDim] (query, key, value
     * blocks side by side, each head-major); {@code attentionMask} is INT32 [batch, seq] with 1 for
     * real tokens and 0 for padding (optional: all real). Writes context [batch·seq, heads·headDim].
     */
    void attention(DeviceStream stream, long qkv, long attentionMask, long workspace, long context, int batch,
                   int seq, int heads, int headDim);

    /** y = LayerNorm(x + residual) · gamma + beta over the last dimension; {@code residual} optional. */
    void addLayerNorm(DeviceStream stream, long x, long residual, long gamma, long beta, long y, int rows, int cols,
                      float eps);

    /**
     * A transformer's output projection and its post-norm: {@code y = LayerNorm(x · weightᵀ + bias + residual) · gamma
     * + beta} over rows of {@code out}; {@code y} also holds the pre-norm rows in between, so it must not alias
     * {@code x} or {@code residual}. The default runs {@link #linear} into {@code y} and then {@link #addLayerNorm} of
     * {@code y + residual} in place; a backend whose products can add the residual themselves (cuBLASLt's C operand)
     * adds it in the product and normalises in place, one launch fewer.
     */
    default void linearAddLayerNorm(DeviceStream stream, long x, long weight, long bias, long residual, long gamma,
                                    long beta, long y, int rows, int in, int out, float eps) {
        linear(stream, x, weight, bias, y, rows, in, out, Activation.NONE);
        addLayerNorm(stream, y, residual, gamma, beta, y, rows, out, eps);
    }

    /** out[b, :] = CLS state or the mask-weighted mean of hidden[b, s, :]; {@code attentionMask} optional. */
    void pool(DeviceStream stream, long hidden, long attentionMask, long out, int batch, int seq, int cols,
              Pooling pooling);

    /** Row-wise softmax of x[rows, cols] into y (may alias x). */
    void softmax(DeviceStream stream, long x, long y, int rows, int cols);

    // ---- packed sequences (dynamic batching without padding) ------------------------------------
    //
    // Several requests' sequences of different lengths share one forward: their tokens are rows of one
    // [tokens, hidden] matrix, sequence i occupying rows offsets[i] .. offsets[i+1]-1 (offsets: INT32 device
    // array of sequences + 1 cumulative row counts, offsets[0] = 0, offsets[sequences] <= tokens). Row-wise ops
    // (linear, LayerNorm) need nothing new; the three ops below are the ones that must know where a sequence
    // starts. A sequence may be empty (it pools to zeros), and rows from offsets[sequences] on belong to no
    // sequence: attention writes no context for them and pooling never reads them (a CUDA graph's padding, which
    // is replayed for batches of other lengths: model/bert/PackedPadding).

    /**
     * Whether this backend and precision implement {@link #packedEmbeddingSum}, {@link #varlenAttention}
     * and {@link #packedPool} for attention heads of {@code headDim} (on bf16 activations,
     * {@link #activationBytes()} = 2, {@link #packedEmbeddingLayerNorm} in place of {@link #packedEmbeddingSum}, and
     * the other two on bf16 data); without them a batch of sequences is padded to its longest one instead.
     */
    default boolean supportsPackedSequences(int headDim) {
        return false;
    }

    /**
     * out[t, :] = word[ids[t]] + position[positions[t]] + tokenType[types[t]] for every packed row t;
     * {@code inputIds}, {@code positionIds}, {@code tokenTypeIds} are INT32 device arrays of {@code tokens};
     * {@code tokenTypeIds} optional (type 0).
     */
    default void packedEmbeddingSum(DeviceStream stream, long inputIds, long tokenTypeIds, long positionIds,
                                    long wordTable, long positionTable, long tokenTypeTable, long out, int tokens,
                                    int hidden) {
        throw new UnsupportedOperationException(getClass().getSimpleName() + " has no packed-sequence ops");
    }

    /**
     * {@link #packedEmbeddingSum} followed by LayerNorm (· gamma + beta) of every packed row, written in the activation
     * type: the packed form of {@link #embeddingLayerNorm}. Ops holding bf16 activations must override it (their
     * {@link #addLayerNorm} reads bf16, the sum is FP32); the default, for FP32 activations, runs the two ops, the
     * LayerNorm in place on {@code out}.
     */
    default void packedEmbeddingLayerNorm(DeviceStream stream, long inputIds, long tokenTypeIds, long positionIds,
                                          long wordTable, long positionTable, long tokenTypeTable, long gamma,
                                          long beta, long out, int tokens, int hidden, float eps) {
        packedEmbeddingSum(stream, inputIds, tokenTypeIds, positionIds, wordTable, positionTable, tokenTypeTable, out,
                tokens, hidden);
        addLayerNorm(stream, out, 0, gamma, beta, out, tokens, hidden, eps);
    }

    /**
     * {@link #attention} for packed sequences: each sequence attends only to its own rows. {@code qkv} is
     * [tokens, 3·heads·headDim], {@code attentionMask} INT32 [tokens] (optional: all real), {@code offsets} as
     * above; {@code maxSeq} bounds the longest sequence (a hint: the lengths come from the offsets). Writes context
     * [tokens, heads·headDim] for the rows of sequences; needs no workspace.
     */
    default void varlenAttention(DeviceStream stream, long qkv, long attentionMask, long offsets, long context,
                                 int sequences, int tokens, int maxSeq, int heads, int headDim) {
        throw new UnsupportedOperationException(getClass().getSimpleName() + " has no packed-sequence ops");
    }

    /**
     * out[i, :] = the first row of sequence i (CLS) or the mask-weighted mean of its rows, zeros for an empty one;
     * {@code attentionMask} INT32 [tokens], optional.
     */
    default void packedPool(DeviceStream stream, long hidden, long attentionMask, long offsets, long out,
                            int sequences, int tokens, int cols, Pooling pooling) {
        throw new UnsupportedOperationException(getClass().getSimpleName() + " has no packed-sequence ops");
    }
}
