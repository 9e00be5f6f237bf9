package io.gpupool.kernels.cuda;

import io.gpupool.backend.ComputeDevice;
import io.gpupool.backend.DeviceStream;
import io.gpupool.backend.KernelModule;
import io.gpupool.backend.MatmulLibrary;
import io.gpupool.backend.MatmulLibrary.Compute;
import io.gpupool.backend.MatmulLibrary.ElementType;
import io.gpupool.kernels.StreamWorkspaces;
import io.gpupool.kernels.TensorOps;
import io.gpupool.memory.DeviceAllocator;

import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.Optional;

import static io.gpupool.kernels.cuda.KernelLauncher.aligned;
import static io.gpupool.kernels.cuda.KernelLauncher.pointer;
import static io.gpupool.kernels.cuda.KernelLauncher.positive;

/**
 * {@link TensorOps} on a CUDA device: launches the kernels of {@code src/main/cuda/*.cu}, compiled to the PTX
 * committed under {@code src/main/resources/ptx/} (compute_80, JIT-compiled by the driver for the card at hand).
 * This class is the entry the rest of the code uses: it decides the activation type and which engine multiplies,
 * checks what every path shares, and hands each op to the part that owns its kernels. No part calls back into it;
 * none touches JCuda (modules come from {@link ComputeDevice#loadModule}, launches go through
 * {@link DeviceStream#launch}).
 * <pre>
 *   op                                   part                 kernels, launch shapes, precision
 *   linear                               LibraryGemm          cuBLASLt plans per stream, workspaces, tuning per shape
 *                                        └ else GemmKernels   gemm_f32 | gemm_tc_* tiles, split-K, activation pass
 *   linearAddLayerNorm                   here: the product (the residual in it with KernelOptions.residualInGemm),
 *                                        then CudaRowOps.addLayerNorm
 *   attention, attentionWorkspaceBytes   CudaAttentionOps     by precision, head size and AttentionKernels
 *   embeddingSum, embeddingLayerNorm,    CudaRowOps           one row per block (per warp for LayerNorm)
 *   addLayerNorm, pool, softmax, toFloat32
 *   packed*, varlenAttention             CudaPackedOps        packed sequences (dynamic batching)
 *   all of them                          KernelLauncher       PTX, launch and its count, grid arithmetic, checks
 * </pre>
 *
 * <h2>Precision</h2>
 * {@link #linear} depends on it ({@link GemmKernels} says how), and so does {@link #attention}
 * ({@link CudaAttentionOps}). LayerNorm, softmax and pooling always compute in FP32.
 *
 * <h2>cuBLASLt</h2>
 * Built with a {@link MatmulLibrary} (cuBLASLt through FFM, see {@code backend/cuda/CublasLtLibrary}), every linear
 * layer is one library call ({@link LibraryGemm}) instead of gpupool's kernels, which stay as the fallback where the
 * library cannot be loaded or declines a shape ({@link #gemmEngine()} says which runs). {@link #linearAddLayerNorm}
 * (a transformer's output projection and its post-norm) is the product and then add+LayerNorm in place; with
 * {@link KernelOptions#residualInGemm()} the library adds the residual itself (its C operand, beta = 1, out of place) and
 * LayerNorm runs without one, so the norm reads one tensor instead of two. The launch count is the same either way
 * (add+LayerNorm is one kernel). A shape the library declines, or an operand not 256-byte aligned, takes the
 * unfused path.
 *
 * <p>A stream that only ever runs with a pinned workspace (the graph capture stream) never allocates from the pool
 * ({@link LibraryStreamState}). {@link #workspaceNeeded} tells the capture how much scratch the forward's products
 * used, so each graph carries a workspace of its own.
 *
 * <h2>BF16-resident activations</h2>
 * With the library and {@link Precision#BF16}, activations live in device memory as bf16 ({@link
 * #activationBytes()} = 2) and so do the linear weights and biases: the products read and write bf16 (FP32
 * accumulation), attention reads bf16 QKV and writes bf16 context, LayerNorm and pooling read and write bf16 with
 * FP32 statistics, and {@link #toFloat32} widens the outputs a client receives. Embedding tables and LayerNorm
 * parameters stay FP32. Without the library BF16 keeps FP32 activations and rounds operands as the tensor-core
 * kernels load them. The packed-sequence ops run in their bf16 forms only with {@code gpupool.kernels.packed-bf16}
 * ({@link KernelOptions#packedBf16()}); {@link #fp32Activations()} is an own-kernel sibling on FP32 activations.
 *
 * <p>Arguments are checked with messages naming the argument ({@link KernelLauncher}); device pointers are trusted
 * to cover the shapes given, and token ids to index the tables.
 */
public final class CudaTensorOps implements TensorOps, AutoCloseable {



    /** {@code -Dgpupool.kernels.splitK=false} turns split-K off for instances built without an explicit choice. */
    static final boolean SPLIT_K_DEFAULT = Boolean.parseBoolean(System.getProperty("gpupool.kernels.splitK", "true"));
    /** {@code -Dgpupool.kernels.tf32Attention=false}: FP32 attention under TF32 precision (read once). */
    static final boolean TF32_ATTENTION_DEFAULT =
            Boolean.parseBoolean(System.getProperty("gpupool.kernels.tf32Attention", "true"));

    /**
     * The attention kernels of the constructors that take no explicit choice: {@code -Dgpupool.kernels.attention}
     * (CLASSIC or TILED, any case; read once), else TILED: the same results within rounding and the faster kernels
     * at every BERT shape measured (docs/benchmarks.md, "Validation call").
     */
    static final AttentionKernels ATTENTION_DEFAULT =
            attentionKernels(System.getProperty("gpupool.kernels.attention", "TILED"));

    private final ComputeDevice device;
    private final Precision precision;
    private final boolean tf32Attention;
    private final AttentionKernels attentionKernels;
    private final boolean bf16Activations;
    /** Packed-sequence ops on bf16 activations ({@code gpupool.kernels.packed-bf16}); false on FP32 activations. */
    private final boolean packedBf16;
    /** {@link KernelOptions#residualInGemm()}. */
    private final boolean residualInGemm;
    /** Launches and their count, shared by the parts below. */
    private final KernelLauncher launcher = new KernelLauncher();
    private final GemmKernels gemmKernels;
    /** The products through the library; null without a library. */
    private final LibraryGemm libraryGemm;
    private final CudaAttentionOps attentionOps;
    private final CudaRowOps rowOps;
    /** Kernels over packed sequences (dynamic batching), from packed.ptx. */
    private final CudaPackedOps packed;
    /** {@link #fp32Activations()}: this instance, or with bf16 activations an own-kernel sibling. */
    private final CudaTensorOps fp32Sibling;

    /** FP32 kernels only (exact). */
    public CudaTensorOps(ComputeDevice device) {
        this(device, Precision.FP32);
    }

    /**
     * Loads the PTX modules on {@code device}; linear layers multiply in {@code precision}; split-K as the system
     * property {@code gpupool.kernels.splitK} says (default on).
     */
    public CudaTensorOps(ComputeDevice device, Precision precision) {
        this(device, precision, SPLIT_K_DEFAULT);
    }

    /** As {@link #CudaTensorOps(ComputeDevice, Precision)}, with split-K for few-tile products on or off. */
    public CudaTensorOps(ComputeDevice device, Precision precision, boolean splitK) {
        this(device, precision, splitK, TF32_ATTENTION_DEFAULT);
    }

    /** Also chooses whether {@link Precision#TF32} uses the TF32 tensor-core attention (head size 64). */
    public CudaTensorOps(ComputeDevice device, Precision precision, boolean splitK, boolean tf32Attention) {
        this(device, precision, splitK, tf32Attention, null, null);
    }

    /**
     * Linear layers through {@code library} (null: gpupool's kernels), each stream's workspace allocated from
     * {@code workspaces} (the device's activation pool) on its first product; split-K and TF32 attention as the
     * system properties say.
     */
    public CudaTensorOps(ComputeDevice device, Precision precision, MatmulLibrary library, DeviceAllocator workspaces) {
        this(device, precision, library, workspaces, KernelOptions.DEFAULT);
    }

    /** As {@link #CudaTensorOps(ComputeDevice, Precision, MatmulLibrary, DeviceAllocator)} with opt-in kernel paths. */
    public CudaTensorOps(ComputeDevice device, Precision precision, MatmulLibrary library, DeviceAllocator workspaces,
                         KernelOptions options) {
        this(device, precision, library, workspaces, options, ATTENTION_DEFAULT);
    }

    /** With opt-in kernel paths and the generation of the head-size-64 attention kernels. */
    public CudaTensorOps(ComputeDevice device, Precision precision, MatmulLibrary library, DeviceAllocator workspaces,
                         KernelOptions options, AttentionKernels attentionKernels) {
        this(device, precision, SPLIT_K_DEFAULT, TF32_ATTENTION_DEFAULT, library, workspaces, options,
                attentionKernels, GemmTuner.DEVICE_EVENTS);
    }

    /** As the public constructors, with GEMM tuning timed by {@code timer} (tests play the device clock). */
    CudaTensorOps(ComputeDevice device, Precision precision, MatmulLibrary library, DeviceAllocator workspaces,
                  KernelOptions options, GemmTuner.Timer timer) {
        this(device, precision, SPLIT_K_DEFAULT, TF32_ATTENTION_DEFAULT, library, workspaces, options,
                ATTENTION_DEFAULT, timer);
    }

    private CudaTensorOps(ComputeDevice device, Precision precision, boolean splitK, boolean tf32Attention,
                          MatmulLibrary library, DeviceAllocator workspaces) {
        this(device, precision, splitK, tf32Attention, library, workspaces, KernelOptions.DEFAULT, ATTENTION_DEFAULT,
                GemmTuner.DEVICE_EVENTS);
    }

    private CudaTensorOps(ComputeDevice device, Precision precision, boolean splitK, boolean tf32Attention,
                          MatmulLibrary library, DeviceAllocator workspaces, KernelOptions options,
                          AttentionKernels attentionKernels, GemmTuner.Timer timer) {
        Objects.requireNonNull(options, "options");
        if (library != null) {
            Objects.requireNonNull(workspaces, "workspaces");
        }
        StreamWorkspaces streamWorkspaces = library == null ? null
                : new StreamWorkspaces(workspaces, library.workspaceBytes());
        this.device = Objects.requireNonNull(device, "device");
        this.precision = Objects.requireNonNull(precision, "precision");
        this.tf32Attention = tf32Attention;
        this.attentionKernels = Objects.requireNonNull(attentionKernels, "attentionKernels");
        KernelModule gemm = device.loadModule("gemm", KernelLauncher.ptx("gemm"));
        KernelModule attention = device.loadModule("attention", KernelLauncher.ptx("attention"));
        KernelModule ops = device.loadModule("ops", KernelLauncher.ptx("ops"));
        this.bf16Activations = library != null && precision == Precision.BF16;
        this.packedBf16 = options.packedBf16() && bf16Activations;
        this.residualInGemm = options.residualInGemm();
        this.gemmKernels = new GemmKernels(gemm, ops, precision, splitK, bf16Activations, launcher);
        this.attentionOps = new CudaAttentionOps(attention, ops, precision, tf32Attention, attentionKernels,
                bf16Activations, launcher);
        this.rowOps = new CudaRowOps(ops, bf16Activations, options.warpLayerNorm(), launcher);
        this.packed = new CudaPackedOps(device, bf16Activations);
        Compute compute = switch (precision) {
            case BF16 -> bf16Activations ? Compute.BF16 : null;
            case TF32 -> Compute.TF32;
            case FP32 -> Compute.FP32;
            case TF32X3 -> null;   // no library equivalent: gpupool's three-product kernels
        };
        this.libraryGemm = library == null ? null : new LibraryGemm(device.name(), library, streamWorkspaces,
                precision, compute, bf16Activations ? ElementType.BF16 : ElementType.FP32,
                options.tuneGemms(), new GemmTuner(timer), gemmKernels, launcher);
        this.fp32Sibling = bf16Activations ? new CudaTensorOps(device, precision, splitK, tf32Attention, null, null,
                new KernelOptions(false, false, options.warpLayerNorm()), attentionKernels, timer) : this;
    }

    @Override
    public TensorOps fp32Activations() {
        return fp32Sibling;
    }

    /** Which engine multiplies the linear layers: the library's description (e.g. "cuBLASLt 13.1.0") or {@link GemmEngine#OWN_NAME}. */
    @Override
    public String gemmEngine() {
        return usesLibrary() ? libraryGemm.description() : GemmEngine.OWN_NAME;
    }

    private boolean usesLibrary() {
        return libraryGemm != null && libraryGemm.multiplies();
    }

    @Override
    public int activationBytes() {
        return bf16Activations ? 2 : Float.BYTES;
    }

    /** The device whose modules this instance launches. */
    public ComputeDevice device() {
        return device;
    }

    public Precision precision() {
        return precision;
    }

    /** Whether {@link Precision#TF32} runs head-size-64 attention on the tensor cores. */
    public boolean tf32Attention() {
        return tf32Attention;
    }

    /** Parses a {@code gpupool.kernels.attention} value, in any case. */
    static AttentionKernels attentionKernels(String value) {
        for (AttentionKernels kernels : AttentionKernels.values()) {
            if (kernels.name().equalsIgnoreCase(value.strip())) {
                return kernels;
            }
        }
        throw new IllegalArgumentException("gpupool.kernels.attention = " + value + " is invalid; allowed: CLASSIC, TILED");
    }

    /** Which generation of the head-size-64 attention kernels runs. */
    public AttentionKernels attentionKernels() {
        return attentionKernels;
    }

    /** Whether few-tile products are split along K (see {@link GemmKernels}). */
    public boolean splitK() {
        return gemmKernels.splitK();
    }

    @Override
    public void embeddingSum(DeviceStream stream, long inputIds, long tokenTypeIds, long wordTable, long positionTable,
                             long tokenTypeTable, long out, int batch, int seq, int hidden) {
        rowOps.embeddingSum(stream, inputIds, tokenTypeIds, wordTable, positionTable, tokenTypeTable, out, batch, seq,
                hidden);
    }

    @Override
    public void embeddingLayerNorm(DeviceStream stream, long inputIds, long tokenTypeIds, long wordTable,
                                   long positionTable, long tokenTypeTable, long gamma, long beta, long out, int batch,
                                   int seq, int hidden, float eps) {
        rowOps.embeddingLayerNorm(stream, inputIds, tokenTypeIds, wordTable, positionTable, tokenTypeTable, gamma, beta,
                out, batch, seq, hidden, eps);
    }

    @Override
    public void toFloat32(DeviceStream stream, long source, long destination, long count) {
        rowOps.toFloat32(stream, source, destination, count);
    }

    @Override
    public void linear(DeviceStream stream, long x, long weight, long bias, long y, int rows, int in, int out,
                       Activation activation) {
        checkProduct(x, weight, y, rows, in, out, 0, false);
        Objects.requireNonNull(activation, "activation");
        if (usesLibrary() && libraryGemm.product(stream, x, weight, bias, 0, y, rows, in, out, activation)) {
            return;
        }
        gemmKernels.linear(stream, x, weight, bias, y, rows, in, out, activation);
    }

    /**
     * With the library and {@link KernelOptions#residualInGemm()}: the product adds the residual itself (one library call
     * writing {@code x·wᵀ + bias + residual} into y), then LayerNorm of y in place; otherwise, or where the library
     * declines the shape or the pointers, the product and then add+LayerNorm as the interface's default.
     */
    @Override
    public void linearAddLayerNorm(DeviceStream stream, long x, long weight, long bias, long residual, long gamma,
                                   long beta, long y, int rows, int in, int out, float eps) {
        checkProduct(x, weight, y, rows, in, out, residual, true);
        if (residualInGemm && usesLibrary()
                && libraryGemm.product(stream, x, weight, bias, residual, y, rows, in, out, Activation.NONE)) {
            addLayerNorm(stream, y, 0, gamma, beta, y, rows, out, eps);
            return;
        }
        linear(stream, x, weight, bias, y, rows, in, out, Activation.NONE);
        addLayerNorm(stream, y, residual, gamma, beta, y, rows, out, eps);
    }

    /** What every product checks first; {@code residual} only where {@code withResidual}, after the weight. */
    private static void checkProduct(long x, long weight, long y, int rows, int in, int out, long residual,
                                     boolean withResidual) {
        positive("rows", rows);
        positive("in", in);
        positive("out", out);
        pointer("x", x);
        pointer("weight", weight);
        if (withResidual) {
            pointer("residual", residual);
        }
        pointer("y", y);
        aligned("x", x);
        aligned("weight", weight);
        aligned("y", y);
    }

    @Override
    public long attentionWorkspaceBytes(int batch, int seq, int heads, int headDim) {
        return attentionOps.workspaceBytes(batch, seq, heads, headDim);
    }

    @Override
    public void attention(DeviceStream stream, long qkv, long attentionMask, long workspace, long context, int batch,
                          int seq, int heads, int headDim) {
        attentionOps.attention(stream, qkv, attentionMask, workspace, context, batch, seq, heads, headDim);
    }

    @Override
    public void addLayerNorm(DeviceStream stream, long x, long residual, long gamma, long beta, long y, int rows,
                             int cols, float eps) {
        rowOps.addLayerNorm(stream, x, residual, gamma, beta, y, rows, cols, eps);
    }

    @Override
    public void pool(DeviceStream stream, long hidden, long attentionMask, long out, int batch, int seq, int cols,
                     Pooling pooling) {
        rowOps.pool(stream, hidden, attentionMask, out, batch, seq, cols, pooling);
    }

    @Override
    public void softmax(DeviceStream stream, long x, long y, int rows, int cols) {
        rowOps.softmax(stream, x, y, rows, cols);
    }

    /** The measured choices so far, in no particular order. */
    @Override
    public List<GemmChoice> gemmChoices() {
        return libraryGemm == null ? List.of() : libraryGemm.gemmChoices();
    }

    @Override
    public long workspaceBound() {
        return libraryGemm == null ? 0 : libraryGemm.workspaceBound();
    }

    @Override
    public long workspaceNeeded(DeviceStream stream) {
        return libraryGemm == null ? 0 : libraryGemm.workspaceNeeded(stream);
    }

    /**
     * Pins (or with 0 withdraws) the workspace of {@code stream}; a stream first seen here gets no block of its
     * own, so a capture stream never allocates from the pool (see {@code model/graph/ForwardCapture}).
     */
    @Override
    public void useWorkspace(DeviceStream stream, long address, long bytes) {
        if (libraryGemm != null) {
            libraryGemm.useWorkspace(stream, address, bytes);
        }
    }

    /**
     * Kernel launches plus library calls these ops (and their FP32 sibling) have enqueued: the difference across
     * a forward is its launch count.
     */
    public long launches() {
        return launcher.launches() + (fp32Sibling == this ? 0 : fp32Sibling.launches());
    }

    /** Bytes of pool memory held as cuBLASLt workspaces (one per stream that ran a product and still holds it). */
    public long workspaceBytesHeld() {
        return libraryGemm == null ? 0 : libraryGemm.workspaces().heldBytes();
    }

    @Override
    public Optional<StreamWorkspaces> workspaces() {
        return Optional.ofNullable(libraryGemm == null ? null : libraryGemm.workspaces());
    }

    /**
     * Frees every plan and gives the workspaces back to the pool. Streams must be idle (their requests finished);
     * call before the pool and the device close.
     */
    @Override
    public void close() {
        if (libraryGemm == null) {
            return;
        }
        List<RuntimeException> failures = new ArrayList<>();
        libraryGemm.close(failures);
        if (!failures.isEmpty()) {
            RuntimeException first = failures.getFirst();
            failures.subList(1, failures.size()).forEach(first::addSuppressed);
            throw first;
        }
    }

    // ---- packed sequences (CudaPackedOps): FP32 attention, so where attention computes in FP32, or on bf16 ----
    // ---- activations when gpupool.kernels.packed-bf16 asks (FP32 attention over bf16 loads and stores)   ----

    @Override
    public boolean supportsPackedSequences(int headDim) {
        boolean fp32Attention = precision == Precision.FP32 || precision == Precision.TF32X3
                || precision == Precision.TF32 && !tf32Attention;
        return (bf16Activations ? packedBf16 : fp32Attention) && headDim <= CudaPackedOps.MAX_HEAD_DIM;
    }

    @Override
    public void packedEmbeddingLayerNorm(DeviceStream stream, long inputIds, long tokenTypeIds, long positionIds,
                                         long wordTable, long positionTable, long tokenTypeTable, long gamma,
                                         long beta, long out, int tokens, int hidden, float eps) {
        if (!bf16Activations) {
            TensorOps.super.packedEmbeddingLayerNorm(stream, inputIds, tokenTypeIds, positionIds, wordTable,
                    positionTable, tokenTypeTable, gamma, beta, out, tokens, hidden, eps);
            return;
        }
        packed.embeddingLayerNormBf16(stream, inputIds, tokenTypeIds, positionIds, wordTable, positionTable,
                tokenTypeTable, gamma, beta, out, tokens, hidden, eps);
    }

    @Override
    public void packedEmbeddingSum(DeviceStream stream, long inputIds, long tokenTypeIds, long positionIds,
                                   long wordTable, long positionTable, long tokenTypeTable, long out, int tokens,
                                   int hidden) {
        if (bf16Activations) {
            throw new UnsupportedOperationException("packedEmbeddingSum writes FP32; on bf16 activations use "
                    + "packedEmbeddingLayerNorm");
        }
        packed.embeddingSum(stream, inputIds, tokenTypeIds, positionIds, wordTable, positionTable, tokenTypeTable, out,
                tokens, hidden);
    }

    @Override
    public void varlenAttention(DeviceStream stream, long qkv, long attentionMask, long offsets, long context,
                                int sequences, int tokens, int maxSeq, int heads, int headDim) {
        packed.attention(stream, qkv, attentionMask, offsets, context, sequences, heads, headDim);
    }

    @Override
    public void packedPool(DeviceStream stream, long hidden, long attentionMask, long offsets, long out, int sequences,
                           int tokens, int cols, Pooling pooling) {
        packed.pool(stream, hidden, attentionMask, offsets, out, sequences, cols, pooling);
    }
}
