package io.gpupool.kernels.cuda;

import io.gpupool.backend.ComputeDevice;
import io.gpupool.backend.DeviceStream;
import io.gpupool.backend.KernelFunction;
import io.gpupool.backend.KernelModule;
import io.gpupool.backend.MatmulLibrary;
import io.gpupool.backend.MatmulLibrary.Compute;
import io.gpupool.backend.MatmulLibrary.ElementType;
import io.gpupool.backend.MatmulLibrary.Epilogue;
import io.gpupool.backend.MatmulLibrary.Matmul;
import io.gpupool.kernels.StreamWorkspaces;
import io.gpupool.kernels.TensorOps;
import io.gpupool.memory.DeviceAllocator;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.LongAdder;

/**
 * {@link TensorOps} on a CUDA device: launches the kernels of {@code src/main/cuda/*.cu}, compiled to the PTX
 * committed under {@code src/main/resources/ptx/} (compute_80, JIT-compiled by the driver for the card at hand).
 * This class only picks kernels and launch shapes; it never touches JCuda: modules come from
 * {@link ComputeDevice#loadModule} and launches go through {@link DeviceStream#launch}.
 *
 * <h2>Kernels and launch shapes</h2>
 * <pre>
 *   op            kernel                         grid                        block
 *   embeddingSum  ops/embedding_sum              (batch·seq)                 ≤256
 *   linear        gemm/gemm_f32                  (⌈out/128⌉, ⌈rows/128⌉)     256   precision FP32, or a
 *                                                                                  shape the others reject
 *                 gemm/gemm_tc_{tf32,bf16,tf32x3}_128 (⌈out/128⌉, ⌈rows/128⌉) 256   enough 128² tiles
 *                 gemm/gemm_tc_{tf32,bf16,tf32x3}_64  (⌈out/64⌉,  ⌈rows/64⌉)   128   small products
 *                 split-K (few output tiles, see below): three launches
 *                   gemm/gemm_splitk_init       (⌈rows·out/256⌉ ≤ 1024)     256   Y = bias or 0
 *                   gemm/gemm_f32_splitk | gemm_tc_*_64_splitk
 *                                               (tiles as above, slices)    as above
 *                   gemm/gemm_splitk_act        (as init)                   256   only if activation ≠ NONE
 *   attention     attention/attention_d{32,64,128} (⌈seq/32⌉, heads, batch)  128   FP32, by head size
 *                 attention/attention_d64_tiled  (⌈seq/64⌉, heads, batch)    128   FP32, head size 64, attention
 *                                                                                  kernels TILED
 *                 attention/attention_bf16_d64   (⌈seq/64⌉, heads, batch)    128   BF16 and head size 64
 *                 attention/attention_tf32_d64   (⌈seq/64⌉, heads, batch)    128   TF32 and head size 64
 *   addLayerNorm  ops/add_layer_norm             (rows)                      ≤256
 *                 ops/add_layer_norm_warp        (rows)                      32    Options.warpLayerNorm, cols a
 *                                                                                  multiple of 128 up to 1024
 *   pool          ops/pool_cls | ops/pool_mean   (batch)                     ≤256
 *   softmax       ops/softmax_rows               (rows)                      ≤256
 * </pre>
 *
 * <h2>Precision</h2>
 * {@link #linear} depends on it (and {@link #attention}, see below). {@link Precision#FP32} is exact single precision on the CUDA cores and
 * matches a float reference to rounding (the mode the tests compare with transformers at 1e-4).
 * {@link Precision#TF32} and {@link Precision#BF16} run on the tensor cores with FP32 accumulation; inputs and
 * outputs stay FP32 in memory and operands are rounded as they are loaded (TF32 truncates to a 10-bit mantissa,
 * BF16 rounds to nearest-even 8 bits), so no bf16 copy of the weights is needed. {@link Precision#TF32X3} splits
 * each FP32 operand into two TF32 parts and sums three tensor-core products (hi·hi + hi·lo + lo·hi): close to FP32
 * accuracy (about 2^-21 relative per product) at a third of the TF32 rate, an alternative to FP32 on large
 * products; attention stays FP32 with it. The tensor-core kernels need
 * {@code in % 4 == 0}; other shapes fall back to the FP32 kernel.
 *
 * <h2>Split-K</h2>
 * A 128-token product has only 6 (FP32, 128² tiles) to 24 (tensor cores, 64² tiles) output tiles for 768
 * outputs: a fraction of the 132 multiprocessors of an H100/H200, each block walking all of K alone. When the
 * tiles are fewer than {@link #SPLIT_K_TARGET_BLOCKS}, K is cut into {@code s} slices, each a grid z index:
 * <pre>
 *   s = min(SPLIT_K_MAX, ⌊SPLIT_K_TARGET_BLOCKS / tiles⌋, ⌊in / SPLIT_K_MIN_CHUNK⌋)      no split when s &lt; 2
 *   kChunk = ⌈in / s⌉ rounded up to 16 (a tensor-core k-tile);  slices = ⌈in / kChunk⌉
 * </pre>
 * Y is first set to the bias (or zero), every (tile, slice) block atomically adds its partial product, and when
 * the activation is not NONE one more pass applies it in place (the sum is complete only after all slices).
 * Results differ from the unsplit kernels only in the order of the FP32 additions (~1e-7 relative). No
 * workspace is needed. Turned off with {@code -Dgpupool.kernels.splitK=false} (read once, at class load).
 *
 * <p>Attention computes in FP32, except with head size 64 (BERT-base and most BERT-family models) under
 * {@link Precision#BF16}, where a tensor-core kernel rounds Q, K, V and the probabilities to bf16, and under
 * {@link Precision#TF32}, where one rounds them to TF32 (FP32 softmax and accumulation in both). The TF32 one is
 * turned off (FP32 attention under TF32) with {@code -Dgpupool.kernels.tf32Attention=false}. {@link
 * Precision#TF32X3} and {@link Precision#FP32} always use the FP32 kernels. LayerNorm, softmax and pooling always compute in FP32. Attention needs no workspace: it is
 * fused (online softmax), so {@link #attentionWorkspaceBytes} is 0, except on bf16 activations with a head size
 * other than 64 (see below).
 *
 * <p>{@link AttentionKernels} picks between two generations of the head-size-64 kernels (same inputs, outputs and
 * masking, both fused): CLASSIC, where each thread computes one score at a time (FP32) or a warp reloads every K and
 * V fragment for its 16 queries and waits for each tile's loads (bf16); and TILED, where FP32 threads keep 4×4
 * blocks of scores in registers and the bf16 kernel streams K and V with cp.async behind the math, skips key tiles
 * of padding only, and on large grids shares each K/V tile among 8 warps (128 queries) (src/main/cuda/attention.cu
 * explains both). TILED is the default; other head sizes always run the classic kernels.
 *
 * <h2>cuBLASLt</h2>
 * Built with a {@link MatmulLibrary} (cuBLASLt through FFM, see {@code backend/cuda/CublasLtLibrary}), every linear
 * layer is one library call instead of the kernels above, which stay as the fallback where the library cannot be
 * loaded ({@link #gemmEngine()} says which runs). Per stream this instance keeps
 * <pre>
 *   stream ──► StreamState { plans: (rows, in, out, epilogue) ──► Matmul, planned once by the heuristic;
 *                            pinned by useWorkspace (a graph capture): memory of the caller's, no block of its own }
 *   stream ──► StreamWorkspaces: one pool block of MatmulLibrary.workspaceBytes() for a stream not pinned,
 *              allocated on its first product, kept while it is busy, given back when its owner releases the
 *              idle stream; pinned for good once a CUDA graph captured its address
 * </pre>
 * (a stream runs one request at a time, so its state needs no lock; plans take the workspace address per run,
 * so a workspace given back and taken again elsewhere leaves them valid). Epilogues: bias always fused; GELU fused
 * (the library's tanh form, within 5e-4 of erf) under TF32 and BF16, where rounding is larger anyway; under FP32 the
 * exact erf GELU, and TANH everywhere, run as one extra in-place pass, so FP32 stays within 1e-4 of transformers.
 *
 * <p>{@link #linearAddLayerNorm} (a transformer's output projection and its post-norm) is the product and then
 * add+LayerNorm in place; with {@link Options#residualInGemm()} the library adds the residual itself (its C operand,
 * beta = 1, out of place) and LayerNorm runs without one, so the norm reads one tensor instead of two. The launch
 * count is the same either way (add+LayerNorm is one kernel). A shape the library declines, or an operand not
 * 256-byte aligned, takes the unfused path.
 *
 * <h2>Choosing per shape</h2>
 * With {@link Options#tuneGemms()} (off by default) the heuristic's first choice is not taken on trust. The first
 * time any stream runs a product shape (rows, in, out, epilogue, residual or not; a model's warm-up run for the shapes
 * it warms), {@link GemmTuner} times on that stream, with the product's own operands and workspace, the library's
 * first {@link #TUNING_CANDIDATES} algorithms ({@link MatmulLibrary#candidates}; each with its activation pass where
 * the epilogue does not fuse it) and, for a product without a residual, gpupool's own kernels for the shape, each
 * measurement queued behind fills of the workspace so that the device time is the runs' own; the library's first
 * choice is kept unless another beats it clearly in a second comparison, and the product then runs on the choice:
 * <pre>
 *   tuned: key ──► Tuned { winning plan (the measuring stream's own; other streams run twins of it, Matmul.twin)
 *                          | gpupool's kernels | nothing ran: the heuristic's choice;  GemmChoice for operators }
 * </pre>
 * A shape first seen while its stream captures a graph, with an output that aliases an input (the candidates run
 * repeatedly), or beyond {@link #MAX_TUNED_SHAPES}, runs the heuristic's choice unmeasured. Two streams measuring one
 * shape at once both finish; the first to store its choice serves both. {@link #gemmChoices()} lists the outcomes.
 *
 * <p>A stream that only ever runs with a pinned workspace (the graph capture stream) never allocates from the pool:
 * a pool call while a stream captures would query fences and is illegal under capture. {@link #workspaceNeeded}
 * tells the capture how much scratch the forward's products used, so each graph carries a workspace of its own.
 *
 * <h2>BF16-resident activations</h2>
 * With the library and {@link Precision#BF16}, activations live in device memory as bf16 ({@link
 * #activationBytes()} = 2) and so do the linear weights and biases: the products read and write bf16 (FP32
 * accumulation), attention reads bf16 QKV and writes bf16 context ({@code attention_bf16io_d64}; for other head
 * sizes QKV is widened into the attention workspace, the FP32 kernel runs there and the context is narrowed back), LayerNorm and pooling read and write bf16 with FP32 statistics, and {@link #toFloat32} widens the
 * outputs a client receives. Embedding tables and LayerNorm parameters stay FP32. Without the library BF16 keeps
 * FP32 activations and rounds operands as the tensor-core kernels load them.
 * <pre>
 *   op (bf16 activations)  kernel
 *   embeddingLayerNorm     ops/embedding_layer_norm_bf16   (batch·seq)            ≤256
 *   addLayerNorm           ops/add_layer_norm_bf16_reg     (rows)                 ≤256   cols ≤ 8·threads: x + residual
 *                                                                                        kept in registers, read once
 *                          ops/add_layer_norm_bf16         (rows)                 ≤256   longer rows
 *                          ops/add_layer_norm_warp_bf16    (rows)                 32     Options.warpLayerNorm, cols a
 *                                                                                        multiple of 256 up to 2048
 *   embeddingLayerNorm     ops/embedding_layer_norm_warp{,_bf16} (batch·seq)      32     Options.warpLayerNorm, as above
 *   attention              attention/attention_bf16io_d64  (⌈seq/64⌉, heads, batch) 128   attention kernels CLASSIC
 *                          attention/flash_attention_bf16io_d64_q128w8 (⌈seq/128⌉, heads, batch) 256   TILED, at
 *                                                                          least FLASH_WIDE_MIN_BLOCKS such blocks
 *                          attention/flash_attention_bf16io_d64_q64  (⌈seq/64⌉, heads, batch)  128   TILED, fewer
 *   pool                   ops/pool_cls_bf16 | pool_mean_bf16 (batch)             ≤256
 *   packed ops (only with gpupool.kernels.packed-bf16): packed_embedding_layer_norm_bf16, varlen_attention_bf16,
 *                          packed_pool_{cls,mean}_bf16 (see CudaPackedOps)
 *   linear activation pass ops/activate_bf16               (≤1024 grid-stride)    256
 *   toFloat32              ops/bf16_to_f32                 (≤1024 grid-stride)    256
 *   linear the library declines, or on unaligned operands
 *                          gemm/linear_bf16_warp           (⌈rows·out/8⌉)         256   one warp per output
 * </pre>
 *
 * <p>Arguments are checked (positive dimensions, non-null required pointers, 16-byte aligned linear operands:
 * the GEMM kernels move float4 vectors; pool and weight blocks are 256-byte aligned) with messages naming the
 * argument; device pointers are trusted to cover the shapes given, and token ids to index the tables.
 */
public final class CudaTensorOps implements TensorOps, AutoCloseable {

    /** How {@link #linear} multiplies. */
    public enum Precision { FP32, TF32, BF16, TF32X3 }

    /**
     * Who multiplies the linear layers: AUTO the vendor library where the device has it, else gpupool's kernels;
     * CUBLASLT the library or fail; OWN always gpupool's kernels.
     */
    public enum GemmEngine { AUTO, CUBLASLT, OWN }

    /** Which generation of the head-size-64 attention kernels runs (see the class comment). */
    public enum AttentionKernels {
        /** {@code attention_d64} (FP32) and {@code attention_bf16io_d64} (bf16 activations). */
        CLASSIC,
        /** {@code attention_d64_tiled} (FP32) and {@code flash_attention_bf16io_d64_q{64,128}} (bf16 activations). */
        TILED
    }

    /**
     * Kernel paths an operator can switch; {@link #DEFAULT} has on what a GPU run verified (docs/benchmarks.md,
     * "LayerNorm kernels and the residual in the GEMM").
     *
     * @param packedBf16     on bf16 activations, offer the packed-sequence ops in their bf16 forms, so that batches
     *                       are packed rather than padded (no effect on FP32 activations)
     * @param residualInGemm with the library: {@link #linearAddLayerNorm} adds the residual in the product (cuBLASLt's
     *                       C operand, beta = 1) and then normalises alone, instead of a separate add in the LayerNorm
     * @param warpLayerNorm  LayerNorm, add+LayerNorm and embeddings+LayerNorm on the warp-per-row kernels (16-byte
     *                       loads, the row in registers) where the row length and alignment allow
     * @param tuneGemms      with the library: each product shape, on its first run, times the library's first
     *                       {@link #TUNING_CANDIDATES} algorithms and gpupool's own kernel on the stream and keeps the
     *                       fastest for every stream (see "Choosing per shape" in the class comment)
     */
    public record Options(boolean packedBf16, boolean residualInGemm, boolean warpLayerNorm, boolean tuneGemms) {
        /** The verified defaults: warp-per-row LayerNorm on; packed bf16, the residual in the GEMM, tuning off. */
        public static final Options DEFAULT = new Options(false, false, true, false);
        /** Everything off: the block-per-row LayerNorm kernels and the add in the LayerNorm. */
        public static final Options NONE = new Options(false, false, false, false);

        /** Without GEMM tuning: products run the library heuristic's first choice. */
        public Options(boolean packedBf16, boolean residualInGemm, boolean warpLayerNorm) {
            this(packedBf16, residualInGemm, warpLayerNorm, false);
        }
    }

    /** Library algorithms a tuned shape asks the heuristic for (its first choice among them). */
    public static final int TUNING_CANDIDATES = 8;
    /**
     * Shapes measured per instance at most; later new shapes run the heuristic's first choice, so that a workload of
     * ever new token counts does not keep timing on its requests' streams.
     */
    static final int MAX_TUNED_SHAPES = 1024;
    /**
     * Fills of the workspace each GEMM measurement starts behind, and their size: half a GiB of memset keeps the
     * device busy for longer than the host takes to enqueue a measurement's runs of a small product.
     */
    static final int TUNING_DELAY_FILLS = 16;
    static final long TUNING_DELAY_FILL_BYTES = 32L << 20;

    /** {@link #gemmEngine()} when gpupool's own kernels multiply. */
    public static final String OWN_ENGINE = "gpupool kernels";

    private static final System.Logger LOG = System.getLogger(CudaTensorOps.class.getName());
    /** Columns per thread that {@code add_layer_norm_bf16_reg} keeps in registers (its PER_THREAD). */
    static final int LAYER_NORM_REGISTER_COLUMNS = 8;
    /** Threads per block of the row-wise kernels. */
    private static final int ROW_BLOCK = 256;
    /**
     * Threads per block of the warp-per-row LayerNorm kernels: one row a block, the block size that measured best
     * of 32/64/128/256 at both large and small row counts (docs/benchmarks.md, "LayerNorm kernels").
     */
    static final int WARP_ROW_BLOCK = 32;
    /** Chunks of 32 16-byte vectors a warp-per-row LayerNorm keeps in registers (GP_WARP_LN_MAX_CHUNKS of ops.cu). */
    static final int WARP_LAYER_NORM_MAX_CHUNKS = 8;
    /**
     * Fewer 128×128 output tiles than this and a tensor-core product runs with 64×64 tiles instead, so that
     * small (few-token) products still occupy the device's multiprocessors (132 on an H100/H200). The threshold
     * lies between the grid sizes where each tile size measured faster (tools/cuda-harness/NOTES.md).
     */
    static final int LARGE_TILE_MIN_BLOCKS = 384;
    /**
     * Split-K aims at this many blocks: two waves on 132 multiprocessors (H100/H200), so that a product whose
     * output tiles alone leave most of the device idle spreads its K over the rest. {@link ComputeDevice} does not
     * report the multiprocessor count, hence a constant; on a smaller card it only means more slices than needed.
     */
    static final int SPLIT_K_TARGET_BLOCKS = 264;
    /** The shortest K slice: 128 is 8 tensor-core k-tiles (16 of gemm_f32), enough to run the load pipeline. */
    static final int SPLIT_K_MIN_CHUNK = 128;
    /** At most this many slices, bounding the atomic additions to 16 per output element. */
    static final int SPLIT_K_MAX = 16;
    /** Blocks of the element-wise split-K passes (grid-stride loops). */
    private static final int SPLIT_K_PASS_MAX_BLOCKS = 1024;
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
    /**
     * Fewer 128-query flash blocks than this and bf16 attention runs 64-query blocks instead. Below about one block
     * per multiprocessor pair the device is latency-bound and the smaller blocks, twice as many, finish first; from
     * here on the 8-warp blocks win, since they load each K/V tile once for 128 queries (measurements:
     * docs/benchmarks.md, "Validation call").
     */
    static final int FLASH_WIDE_MIN_BLOCKS = 96;

    private final ComputeDevice device;
    private final Precision precision;
    private final KernelFunction gemmF32;
    private final KernelFunction gemmLarge;
    private final KernelFunction gemmSmall;
    private final boolean splitK;
    private final KernelFunction splitF32;
    private final KernelFunction splitSmall;
    private final KernelFunction splitInit;
    private final KernelFunction splitAct;
    private final KernelFunction attention32;
    private final KernelFunction attention64;
    private final KernelFunction attention128;
    private final KernelFunction attentionBf16;
    private final KernelFunction attentionTf32;
    private final boolean tf32Attention;
    private final KernelFunction embeddingSum;
    private final KernelFunction addLayerNorm;
    private final KernelFunction poolCls;
    private final KernelFunction poolMean;
    private final KernelFunction softmaxRows;
    /** Kernels over packed sequences (dynamic batching), from packed.ptx. */
    private final CudaPackedOps packed;
    private final KernelFunction embeddingLayerNorm;
    private final KernelFunction embeddingLayerNormBf16;
    private final KernelFunction addLayerNormBf16;
    private final KernelFunction addLayerNormBf16Reg;
    private final KernelFunction poolClsBf16;
    private final KernelFunction poolMeanBf16;
    private final KernelFunction activateBf16;
    private final KernelFunction bf16ToF32;
    private final KernelFunction f32ToBf16;
    private final KernelFunction linearBf16Warp;
    private final KernelFunction attentionBf16io;
    private final AttentionKernels attentionKernels;
    private final KernelFunction attentionTiled;
    private final KernelFunction flashNarrow;
    private final KernelFunction flashWide;
    private final KernelFunction addLayerNormWarp;
    private final KernelFunction addLayerNormWarpBf16;
    private final KernelFunction embeddingLayerNormWarp;
    private final KernelFunction embeddingLayerNormWarpBf16;
    /** {@link Options#residualInGemm()}. */
    private final boolean residualInGemm;
    /** {@link Options#warpLayerNorm()}. */
    private final boolean warpLayerNorm;
    /** The library that multiplies, or null for gpupool's kernels. */
    private final MatmulLibrary library;
    /** The library's per-stream workspaces, from the activation pool; null without a library. */
    private final StreamWorkspaces workspaces;
    private final boolean bf16Activations;
    /** Packed-sequence ops on bf16 activations ({@code gpupool.kernels.packed-bf16}); false on FP32 activations. */
    private final boolean packedBf16;
    private final Compute compute;
    private final ElementType elementType;
    private final Map<DeviceStream, StreamState> streams = new ConcurrentHashMap<>();
    /** Kernel launches and library calls enqueued so far (LongAdder: streams of all requests add to it). */
    private final LongAdder launches = new LongAdder();
    /** {@link #fp32Activations()}: this instance, or with bf16 activations an own-kernel sibling. */
    private final CudaTensorOps fp32Sibling;
    /** {@link Options#tuneGemms()}, and a library to tune. */
    private final boolean tuneGemms;
    private final GemmTuner tuner;
    /** Each measured shape's choice, by plan key; shared by all streams (see "Choosing per shape"). */
    private final Map<Long, Tuned> tuned = new ConcurrentHashMap<>();
    private volatile boolean closed;

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
        this(device, precision, library, workspaces, Options.DEFAULT);
    }

    /** As {@link #CudaTensorOps(ComputeDevice, Precision, MatmulLibrary, DeviceAllocator)} with opt-in kernel paths. */
    public CudaTensorOps(ComputeDevice device, Precision precision, MatmulLibrary library, DeviceAllocator workspaces,
                         Options options) {
        this(device, precision, library, workspaces, options, ATTENTION_DEFAULT);
    }

    /** With opt-in kernel paths and the generation of the head-size-64 attention kernels. */
    public CudaTensorOps(ComputeDevice device, Precision precision, MatmulLibrary library, DeviceAllocator workspaces,
                         Options options, AttentionKernels attentionKernels) {
        this(device, precision, SPLIT_K_DEFAULT, TF32_ATTENTION_DEFAULT, library, workspaces, options,
                attentionKernels, GemmTuner.DEVICE_EVENTS);
    }

    /** As the public constructors, with GEMM tuning timed by {@code timer} (tests play the device clock). */
    CudaTensorOps(ComputeDevice device, Precision precision, MatmulLibrary library, DeviceAllocator workspaces,
                  Options options, GemmTuner.Timer timer) {
        this(device, precision, SPLIT_K_DEFAULT, TF32_ATTENTION_DEFAULT, library, workspaces, options,
                ATTENTION_DEFAULT, timer);
    }

    private CudaTensorOps(ComputeDevice device, Precision precision, boolean splitK, boolean tf32Attention,
                          MatmulLibrary library, DeviceAllocator workspaces) {
        this(device, precision, splitK, tf32Attention, library, workspaces, Options.DEFAULT, ATTENTION_DEFAULT,
                GemmTuner.DEVICE_EVENTS);
    }

    private CudaTensorOps(ComputeDevice device, Precision precision, boolean splitK, boolean tf32Attention,
                          MatmulLibrary library, DeviceAllocator workspaces, Options options,
                          AttentionKernels attentionKernels, GemmTuner.Timer timer) {
        Objects.requireNonNull(options, "options");
        if (library != null) {
            Objects.requireNonNull(workspaces, "workspaces");
        }
        this.library = library;
        this.workspaces = library == null ? null : new StreamWorkspaces(workspaces, library.workspaceBytes());
        this.device = Objects.requireNonNull(device, "device");
        this.precision = Objects.requireNonNull(precision, "precision");
        this.splitK = splitK;
        this.tf32Attention = tf32Attention;
        this.attentionKernels = Objects.requireNonNull(attentionKernels, "attentionKernels");
        KernelModule gemm = device.loadModule("gemm", ptx("gemm"));
        KernelModule attention = device.loadModule("attention", ptx("attention"));
        KernelModule ops = device.loadModule("ops", ptx("ops"));
        gemmF32 = gemm.function("gemm_f32");
        String tc = switch (precision) {
            case BF16 -> "bf16";
            case TF32X3 -> "tf32x3";
            default -> "tf32";
        };
        gemmLarge = precision == Precision.FP32 ? gemmF32 : gemm.function("gemm_tc_" + tc + "_128");
        gemmSmall = precision == Precision.FP32 ? gemmF32 : gemm.function("gemm_tc_" + tc + "_64");
        splitF32 = gemm.function("gemm_f32_splitk");
        splitSmall = precision == Precision.FP32 ? splitF32 : gemm.function("gemm_tc_" + tc + "_64_splitk");
        splitInit = gemm.function("gemm_splitk_init");
        splitAct = gemm.function("gemm_splitk_act");
        attention32 = attention.function("attention_d32");
        attention64 = attention.function("attention_d64");
        attention128 = attention.function("attention_d128");
        attentionBf16 = attention.function("attention_bf16_d64");
        attentionTf32 = attention.function("attention_tf32_d64");
        embeddingSum = ops.function("embedding_sum");
        addLayerNorm = ops.function("add_layer_norm");
        poolCls = ops.function("pool_cls");
        poolMean = ops.function("pool_mean");
        softmaxRows = ops.function("softmax_rows");
        this.bf16Activations = library != null && precision == Precision.BF16;
        this.packedBf16 = options.packedBf16() && bf16Activations;
        this.residualInGemm = options.residualInGemm();
        this.warpLayerNorm = options.warpLayerNorm();
        packed = new CudaPackedOps(device, bf16Activations);
        embeddingLayerNorm = ops.function("embedding_layer_norm");
        embeddingLayerNormBf16 = ops.function("embedding_layer_norm_bf16");
        addLayerNormBf16 = ops.function("add_layer_norm_bf16");
        addLayerNormBf16Reg = ops.function("add_layer_norm_bf16_reg");
        poolClsBf16 = ops.function("pool_cls_bf16");
        poolMeanBf16 = ops.function("pool_mean_bf16");
        activateBf16 = ops.function("activate_bf16");
        bf16ToF32 = ops.function("bf16_to_f32");
        f32ToBf16 = ops.function("f32_to_bf16");
        linearBf16Warp = gemm.function("linear_bf16_warp");
        attentionBf16io = attention.function("attention_bf16io_d64");
        attentionTiled = attention.function("attention_d64_tiled");
        flashNarrow = attention.function("flash_attention_bf16io_d64_q64");
        flashWide = attention.function("flash_attention_bf16io_d64_q128w8");
        this.elementType = bf16Activations ? ElementType.BF16 : ElementType.FP32;
        this.compute = switch (precision) {
            case BF16 -> bf16Activations ? Compute.BF16 : null;
            case TF32 -> Compute.TF32;
            case FP32 -> Compute.FP32;
            case TF32X3 -> null;   // no library equivalent: gpupool's three-product kernels
        };
        addLayerNormWarp = ops.function("add_layer_norm_warp");
        addLayerNormWarpBf16 = ops.function("add_layer_norm_warp_bf16");
        embeddingLayerNormWarp = ops.function("embedding_layer_norm_warp");
        embeddingLayerNormWarpBf16 = ops.function("embedding_layer_norm_warp_bf16");
        this.tuneGemms = options.tuneGemms() && library != null;
        this.tuner = new GemmTuner(timer);
        this.fp32Sibling = bf16Activations ? new CudaTensorOps(device, precision, splitK, tf32Attention, null, null,
                new Options(false, false, options.warpLayerNorm()), attentionKernels, timer) : this;
    }

    @Override
    public TensorOps fp32Activations() {
        return fp32Sibling;
    }

    /** Which engine multiplies the linear layers: the library's description (e.g. "cuBLASLt 13.1.0") or {@link #OWN_ENGINE}. */
    @Override
    public String gemmEngine() {
        return usesLibrary() ? library.description() : OWN_ENGINE;
    }

    private boolean usesLibrary() {
        return library != null && compute != null;
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

    /** Whether few-tile products are split along K (see the class comment). */
    public boolean splitK() {
        return splitK;
    }

    /** Reads a committed PTX resource ({@code /ptx/<name>.ptx}). */
    static byte[] ptx(String name) {
        String path = "/ptx/" + name + ".ptx";
        try (InputStream in = CudaTensorOps.class.getResourceAsStream(path)) {
            if (in == null) {
                throw new IllegalStateException("PTX resource " + path + " is missing from the classpath "
                        + "(regenerate with tools/build-ptx.sh)");
            }
            return in.readAllBytes();
        } catch (IOException e) {
            throw new UncheckedIOException("cannot read PTX resource " + path, e);
        }
    }

    @Override
    public void embeddingSum(DeviceStream stream, long inputIds, long tokenTypeIds, long wordTable, long positionTable,
                             long tokenTypeTable, long out, int batch, int seq, int hidden) {
        if (bf16Activations) {
            throw new UnsupportedOperationException("embeddingSum writes FP32; on bf16 activations use "
                    + "embeddingLayerNorm");
        }
        positive("batch", batch);
        positive("seq", seq);
        positive("hidden", hidden);
        pointer("inputIds", inputIds);
        pointer("wordTable", wordTable);
        pointer("positionTable", positionTable);
        pointer("tokenTypeTable", tokenTypeTable);
        pointer("out", out);
        launch(stream, embeddingSum, Math.multiplyExact(batch, seq), 1, 1, rowBlock(hidden), 1, 1, 0,
                inputIds, tokenTypeIds, wordTable, positionTable, tokenTypeTable, out, seq, hidden);
    }

    @Override
    public void embeddingLayerNorm(DeviceStream stream, long inputIds, long tokenTypeIds, long wordTable,
                                   long positionTable, long tokenTypeTable, long gamma, long beta, long out, int batch,
                                   int seq, int hidden, float eps) {
        positive("batch", batch);
        positive("seq", seq);
        positive("hidden", hidden);
        pointer("inputIds", inputIds);
        pointer("wordTable", wordTable);
        pointer("positionTable", positionTable);
        pointer("tokenTypeTable", tokenTypeTable);
        pointer("gamma", gamma);
        pointer("beta", beta);
        pointer("out", out);
        if (!(eps > 0)) {
            throw new IllegalArgumentException("eps must be positive, got " + eps);
        }
        int tokens = Math.multiplyExact(batch, seq);
        if (warpRows(hidden, wordTable | positionTable | tokenTypeTable | gamma | beta | out)) {
            launch(stream, bf16Activations ? embeddingLayerNormWarpBf16 : embeddingLayerNormWarp,
                    ceilDiv(tokens, WARP_ROW_BLOCK / 32), 1, 1, WARP_ROW_BLOCK, 1, 1, 0, inputIds, tokenTypeIds,
                    wordTable, positionTable, tokenTypeTable, gamma, beta, out, tokens, seq, hidden, eps);
            return;
        }
        launch(stream, bf16Activations ? embeddingLayerNormBf16 : embeddingLayerNorm, tokens,
                1, 1, rowBlock(hidden), 1, 1, 0, inputIds, tokenTypeIds, wordTable, positionTable, tokenTypeTable,
                gamma, beta, out, seq, hidden, eps);
    }

    @Override
    public void toFloat32(DeviceStream stream, long source, long destination, long count) {
        pointer("source", source);
        pointer("destination", destination);
        if (count <= 0) {
            throw new IllegalArgumentException("count must be positive, got " + count);
        }
        if (!bf16Activations) {
            stream.copyDeviceToDevice(source, destination, count * Float.BYTES);
            return;
        }
        launch(stream, bf16ToF32, passBlocks(count), 1, 1, 256, 1, 1, 0, source, destination, count);
    }

    @Override
    public void linear(DeviceStream stream, long x, long weight, long bias, long y, int rows, int in, int out,
                       Activation activation) {
        positive("rows", rows);
        positive("in", in);
        positive("out", out);
        pointer("x", x);
        pointer("weight", weight);
        pointer("y", y);
        aligned("x", x);
        aligned("weight", weight);
        aligned("y", y);
        Objects.requireNonNull(activation, "activation");
        if (usesLibrary() && libraryLinear(stream, x, weight, bias, y, rows, in, out, activation)) {
            return;
        }
        ownLinear(stream, x, weight, bias, y, rows, in, out, activation);
    }

    /** gpupool's kernels for the product: on bf16 activations one warp per output, else the GEMM kernels above. */
    private void ownLinear(DeviceStream stream, long x, long weight, long bias, long y, int rows, int in, int out,
                           Activation activation) {
        if (bf16Activations) {
            long elements = (long) rows * out;
            launch(stream, linearBf16Warp, (int) ceilDiv(elements, 8), 1, 1, 256, 1, 1, 0, x, weight, bias, y,
                    rows, out, in, activation.ordinal());
            return;
        }
        KernelFunction kernel = gemmKernel(rows, in, out);
        int tile = kernel == gemmSmall && kernel != gemmF32 ? 64 : 128;
        int threads = tile == 64 ? 128 : 256;
        int gridX = ceilDiv(out, tile);
        int gridY = ceilDiv(rows, tile);
        int slices = splitK ? splitSlices((long) gridX * gridY, in) : 1;
        if (slices < 2) {
            launch(stream, kernel, gridX, gridY, 1, threads, 1, 1, 0,
                    x, weight, bias, y, rows, out, in, activation.ordinal());
            return;
        }
        int chunk = splitChunk(in, slices);
        int passBlocks = (int) Math.min(SPLIT_K_PASS_MAX_BLOCKS, ceilDiv((long) rows * out, 256));
        launch(stream, splitInit, passBlocks, 1, 1, 256, 1, 1, 0, bias, y, rows, out);
        launch(stream, kernel == gemmF32 ? splitF32 : splitSmall, gridX, gridY, ceilDiv(in, chunk), threads, 1, 1, 0,
                x, weight, y, rows, out, in, chunk);
        if (activation != Activation.NONE) {
            launch(stream, splitAct, passBlocks, 1, 1, 256, 1, 1, 0, y, rows, out, activation.ordinal());
        }
    }

    /**
     * One product through the library; false when this shape or these pointers are outside what the plans cover
     * (the caller then uses the kernels).
     */
    private boolean libraryLinear(DeviceStream stream, long x, long weight, long bias, long y, int rows, int in,
                                  int out, Activation activation) {
        return libraryProduct(stream, x, weight, bias, 0, y, rows, in, out, activation);
    }

    /**
     * {@link #libraryLinear}, adding {@code residual} in the product unless it is 0 (then only with activation
     * NONE). Plans are keyed by (rows, in, out, residual or not, epilogue).
     */
    private boolean libraryProduct(DeviceStream stream, long x, long weight, long bias, long residual, long y,
                                   int rows, int in, int out, Activation activation) {
        if (((x | weight | y | bias | residual) & 255) != 0 || rows >= 1 << 24 || in >= 1 << 16 || out >= 1 << 16) {
            return false;
        }
        boolean addsResidual = residual != 0;
        Epilogue epilogue = epilogue(bias != 0, activation);
        StreamState state = state(stream);
        long key = ((long) rows << 40) | ((long) in << 24) | ((long) out << 8) | (addsResidual ? 1 << 4 : 0)
                | epilogue.ordinal();
        Matmul plan = state.plans.get(key);
        if (plan == null) {
            plan = tuneGemms ? tunedPlan(stream, state, key, x, weight, bias, residual, y, rows, in, out, activation,
                    epilogue) : planOrDecline(rows, in, out, epilogue, addsResidual);
            state.plans.put(key, plan);
        }
        if (plan == DECLINED || plan == OWN_KERNELS) {
            return false;
        }
        plan.run(stream, x, weight, bias, residual, y, state.workspaceFor(plan, library, stream, workspaces));
        launches.increment();
        activationPass(stream, y, rows, out, epilogue, activation);
        return true;
    }

    /** The pass that applies {@code activation} after a product whose epilogue did not (see the class comment). */
    private void activationPass(DeviceStream stream, long y, int rows, int out, Epilogue epilogue,
                                Activation activation) {
        if (fused(epilogue, activation)) {
            return;
        }
        long count = (long) rows * out;
        if (bf16Activations) {
            launch(stream, activateBf16, passBlocks(count), 1, 1, 256, 1, 1, 0, y, count, activation.ordinal());
        } else {
            launch(stream, splitAct, passBlocks(count), 1, 1, 256, 1, 1, 0, y, rows, out, activation.ordinal());
        }
    }

    /**
     * This stream's plan for a shape under {@link Options#tuneGemms()}: the shape's measured choice (a twin of the
     * winning plan, or {@link #OWN_KERNELS}), measuring it first on this stream when no stream has; the heuristic's
     * first choice where the shape cannot be measured here (see "Choosing per shape").
     */
    private Matmul tunedPlan(DeviceStream stream, StreamState state, long key, long x, long weight, long bias,
                             long residual, long y, int rows, int in, int out, Activation activation,
                             Epilogue epilogue) {
        boolean addsResidual = residual != 0;
        Tuned choice = tuned.get(key);
        if (choice == null) {
            if (stream.capturing() || y == x || y == residual || tuned.size() >= MAX_TUNED_SHAPES) {
                return planOrDecline(rows, in, out, epilogue, addsResidual);
            }
            Tuned measured = measure(stream, state, x, weight, bias, residual, y, rows, in, out, activation, epilogue);
            Tuned earlier = tuned.putIfAbsent(key, measured);
            if (earlier == null) {
                return measured.plan == null ? measured.fallback(this, rows, in, out, epilogue, addsResidual)
                        : measured.plan;   // this stream keeps the measured plan itself
            }
            if (measured.plan != null) {
                measured.plan.close();   // another stream measured the shape meanwhile: its choice serves all
            }
            choice = earlier;
        }
        if (choice.plan == null) {
            return choice.fallback(this, rows, in, out, epilogue, addsResidual);
        }
        try {
            return choice.plan.twin();
        } catch (RuntimeException e) {
            LOG.log(System.Logger.Level.DEBUG, "{0}: no twin of the measured plan for {1} ({2}); the heuristic''s "
                    + "first choice runs on {3}", device.name(), choice.report.shape(), e.getMessage(), stream);
            return planOrDecline(rows, in, out, epilogue, addsResidual);
        }
    }

    /**
     * Times the library's candidates and, for a product without a residual, gpupool's own kernels, on {@code stream}
     * with the caller's operands, and keeps the winner (closing the other plans). A candidate needing more workspace
     * than the stream has, or one that fails, is left out; when nothing ran, the shape keeps the heuristic's choice.
     */
    private Tuned measure(DeviceStream stream, StreamState state, long x, long weight, long bias, long residual,
                          long y, int rows, int in, int out, Activation activation, Epilogue epilogue) {
        boolean addsResidual = residual != 0;
        String shape = rows + "x" + in + "->" + out + " " + precision + " " + epilogue
                + (addsResidual ? " + residual" : "");
        // first, as the product itself would: a pool that cannot give the stream its workspace fails the request
        long workspace = state.tuningWorkspace(stream, workspaces);
        long workspaceBytes = workspace == 0 ? 0 : state.pinned ? state.pinnedBytes : library.workspaceBytes();
        List<Matmul> offered;
        try {
            offered = library.candidates(rows, in, out, elementType, compute, epilogue, addsResidual,
                    TUNING_CANDIDATES);
        } catch (RuntimeException e) {
            LOG.log(System.Logger.Level.DEBUG, "{0}: {1} offers no algorithm for {2} ({3})", device.name(),
                    library.description(), shape, e.getMessage());
            offered = List.of();
        }
        List<Matmul> plans = new ArrayList<>();
        List<GemmTuner.Candidate> candidates = new ArrayList<>();
        for (Matmul plan : offered) {
            long need = library.workspaceBytes(plan);
            if (need > workspaceBytes) {
                LOG.log(System.Logger.Level.DEBUG, "{0}: {1} {2} needs {3} bytes of workspace, {4} has {5}; skipped",
                        shape, library.description(), plan.algorithm(), need, stream, workspaceBytes);
                plan.close();
                continue;
            }
            long scratch = need == 0 ? 0 : workspace;
            plans.add(plan);
            candidates.add(new GemmTuner.Candidate(library.description() + " " + plan.algorithm(), () -> {
                plan.run(stream, x, weight, bias, residual, y, scratch);
                activationPass(stream, y, rows, out, epilogue, activation);
            }));
        }
        boolean heuristicOffered = !plans.isEmpty() && plans.getFirst() == offered.getFirst();
        if (!addsResidual) {
            candidates.add(new GemmTuner.Candidate(OWN_ENGINE + " (" + ownKernelName(rows, in, out) + ")",
                    () -> ownLinear(stream, x, weight, bias, y, rows, in, out, activation)));
        }
        GemmTuner.Measured measured = tuner.choose(stream, shape, candidates, delay(stream, workspace, workspaceBytes));
        int winner = measured.winner();
        Matmul kept = winner >= 0 && winner < plans.size() ? plans.get(winner) : null;
        for (Matmul plan : plans) {
            if (plan != kept) {
                plan.close();
            }
        }
        boolean own = winner >= 0 && winner == plans.size();
        String engine = winner < 0 ? "heuristic (no candidate ran)" : candidates.get(winner).engine();
        GemmChoice report = new GemmChoice(shape, engine, measured.winnerMillis(),
                heuristicOffered ? measured.millis()[0] : Double.NaN, candidates.size());
        // debug: a workload of ever new token counts measures a shape per new count (the endpoint lists them all)
        LOG.log(System.Logger.Level.DEBUG, "{0}: {1} runs on {2} ({3} ms; the heuristic''s first {4} ms; {5} candidates)",
                device.name(), shape, engine, String.format(java.util.Locale.ROOT, "%.4f", report.millis()),
                String.format(java.util.Locale.ROOT, "%.4f", report.heuristicMillis()), candidates.size());
        return new Tuned(kept, own, report);
    }

    /**
     * What a measurement starts behind ({@link GemmTuner}): {@link #TUNING_DELAY_FILLS} fills of the stream's
     * workspace, scratch no product of the stream reads before writing it, so the device is busy for longer than
     * the host takes to enqueue the measured runs; nothing without a workspace.
     */
    private static Runnable delay(DeviceStream stream, long workspace, long workspaceBytes) {
        long bytes = Math.min(workspaceBytes, TUNING_DELAY_FILL_BYTES);
        if (workspace == 0 || bytes == 0) {
            return () -> { };
        }
        return () -> {
            for (int i = 0; i < TUNING_DELAY_FILLS; i++) {
                stream.fill(workspace, (byte) 0, bytes);
            }
        };
    }

    /** The kernel gpupool's own product would launch for this shape (for naming the choice). */
    private String ownKernelName(int rows, int in, int out) {
        if (bf16Activations) {
            return linearBf16Warp.name();
        }
        KernelFunction kernel = gemmKernel(rows, in, out);
        int tile = kernel == gemmSmall && kernel != gemmF32 ? 64 : 128;
        boolean split = splitK && splitSlices((long) ceilDiv(out, tile) * ceilDiv(rows, tile), in) >= 2;
        return kernel.name() + (split ? " split-K" : "");
    }

    /** The measured choices so far, in no particular order. */
    @Override
    public List<GemmChoice> gemmChoices() {
        return tuned.values().stream().map(t -> t.report).toList();
    }

    /**
     * One shape's measured choice: {@code plan} the winning library plan (owned by the stream that measured it; other
     * streams run twins of it), or null when gpupool's kernels won ({@code own}) or nothing ran.
     */
    private record Tuned(Matmul plan, boolean own, GemmChoice report) {

        /** A stream's plan when no library plan won: {@link #OWN_KERNELS}, or the heuristic's own choice. */
        Matmul fallback(CudaTensorOps ops, int rows, int in, int out, Epilogue epilogue, boolean addsResidual) {
            return own ? OWN_KERNELS : ops.planOrDecline(rows, in, out, epilogue, addsResidual);
        }
    }

    /**
     * A plan for this shape, or {@link #DECLINED} (logged once per shape and stream) where the library offers no
     * algorithm: the product then runs on gpupool's kernels.
     */
    private Matmul planOrDecline(int rows, int in, int out, Epilogue epilogue, boolean addsResidual) {
        try {
            return addsResidual ? library.planResidual(rows, in, out, elementType, compute, epilogue)
                    : library.plan(rows, in, out, elementType, compute, epilogue);
        } catch (RuntimeException e) {
            LOG.log(System.Logger.Level.INFO, "{0}: {1} declines {2}x{3} -> {4} {5}{6}; gpupool''s kernels run it ({7})",
                    device.name(), library.description(), rows, in, out, epilogue,
                    addsResidual ? " + residual" : "", e.getMessage());
            return DECLINED;
        }
    }

    /** The library epilogue for a bias (present or not) and an activation; see the class comment. */
    Epilogue epilogue(boolean bias, Activation activation) {
        if (!bias) {
            return Epilogue.NONE;
        }
        return switch (activation) {
            case GELU -> compute == Compute.FP32 ? Epilogue.BIAS : Epilogue.BIAS_GELU;
            case RELU -> Epilogue.BIAS_RELU;
            default -> Epilogue.BIAS;
        };
    }

    private static boolean fused(Epilogue epilogue, Activation activation) {
        return switch (activation) {
            case NONE -> true;
            case GELU -> epilogue == Epilogue.BIAS_GELU;
            case RELU -> epilogue == Epilogue.BIAS_RELU;
            case TANH -> false;
        };
    }

    private StreamState state(DeviceStream stream) {
        StreamState state = streams.get(stream);
        if (state != null) {
            return state;
        }
        if (closed) {
            throw new IllegalStateException("CUDA tensor ops of " + device.name() + " are closed");
        }
        StreamState fresh = new StreamState(true);         // first product on this stream
        streams.put(stream, fresh);
        return fresh;
    }

    /** Marks a shape the library has no algorithm for. */
    private static final Matmul DECLINED = marker("declined shape");
    /** Marks a shape whose measurement found gpupool's own kernels faster than the library. */
    private static final Matmul OWN_KERNELS = marker("a shape gpupool's kernels run");

    private static Matmul marker(String what) {
        return new Matmul() {
            @Override
            public void run(DeviceStream stream, long x, long w, long bias, long residual, long y, long workspace) {
                throw new IllegalStateException(what);
            }

            @Override
            public void close() {
            }
        };
    }

    @Override
    public long workspaceBound() {
        return library == null ? 0 : library.workspaceBytes();
    }

    @Override
    public long workspaceNeeded(DeviceStream stream) {
        StreamState state = library == null ? null : streams.get(stream);
        return state == null ? 0 : state.neededSincePinned;
    }

    /**
     * Pins (or with 0 withdraws) the workspace of {@code stream}; a stream first seen here gets no block of its
     * own, so a capture stream never allocates from the pool (see {@code model/graph/ForwardCapture}).
     */
    @Override
    public void useWorkspace(DeviceStream stream, long address, long bytes) {
        if (library == null) {
            return;
        }
        if (address != 0 && ((address & 255) != 0 || bytes < 0)) {
            throw new IllegalArgumentException("a workspace must be 256-byte aligned with a size >= 0, got 0x"
                    + Long.toHexString(address) + ", " + bytes + " bytes");
        }
        if (closed) {
            throw new IllegalStateException("CUDA tensor ops of " + device.name() + " are closed");
        }
        StreamState state = streams.computeIfAbsent(stream, s -> new StreamState(false));
        state.pinned = address != 0;
        state.pinnedAddress = address;
        state.pinnedBytes = bytes;
        state.neededSincePinned = 0;
    }

    /**
     * A stream's cuBLASLt plans and where its workspace comes from; touched only by the request that holds the
     * stream. The workspace is the stream's own ({@link StreamWorkspaces}), or while pinned ({@link #useWorkspace})
     * the caller's memory.
     */
    private static final class StreamState {
        /** False for a stream first seen pinned (a capture stream): it never takes a workspace from the pool. */
        final boolean ownWorkspace;
        final PlanCache plans = new PlanCache();
        boolean pinned;
        long pinnedAddress;
        long pinnedBytes;
        /** Most workspace a product run on the stream needed since the last {@link #useWorkspace}. */
        long neededSincePinned;

        StreamState(boolean ownWorkspace) {
            this.ownWorkspace = ownWorkspace;
        }

        /**
         * The workspace candidates may use while a shape is measured, without noting any need (only the winner's
         * runs count towards a capture's workspace): the stream's own, the pinned one, or 0 for none.
         */
        long tuningWorkspace(DeviceStream stream, StreamWorkspaces workspaces) {
            if (!pinned && ownWorkspace) {
                return workspaces.address(stream);
            }
            return pinned ? pinnedAddress : 0;
        }

        /**
         * The workspace address for a run of {@code plan}, noting what it needs while pinned; fails where a pinned
         * workspace is too small or was withdrawn and the plan needs one.
         */
        long workspaceFor(Matmul plan, MatmulLibrary library, DeviceStream stream, StreamWorkspaces workspaces) {
            if (!pinned && ownWorkspace) {
                return workspaces.address(stream);
            }
            long need = library.workspaceBytes(plan);
            neededSincePinned = Math.max(neededSincePinned, need);
            if (pinned && need <= pinnedBytes) {
                return pinnedAddress;
            }
            if (need == 0) {
                return 0; // an algorithm without scratch runs without a workspace
            }
            throw new IllegalStateException(stream + " has " + (pinned ? "a pinned workspace of " + pinnedBytes
                    + " bytes; this product needs " + need : "no workspace (its pinned one was withdrawn)"));
        }
    }

    /**
     * Kernel launches plus library calls these ops (and their FP32 sibling) have enqueued: the difference across
     * a forward is its launch count.
     */
    public long launches() {
        return launches.sum() + (fp32Sibling == this ? 0 : fp32Sibling.launches());
    }

    private void launch(DeviceStream stream, KernelFunction function, int gridX, int gridY, int gridZ, int blockX,
                        int blockY, int blockZ, int sharedMemoryBytes, Object... arguments) {
        stream.launch(function, gridX, gridY, gridZ, blockX, blockY, blockZ, sharedMemoryBytes, arguments);
        launches.increment();
    }

    /** Bytes of pool memory held as cuBLASLt workspaces (one per stream that ran a product and still holds it). */
    public long workspaceBytesHeld() {
        return workspaces == null ? 0 : workspaces.heldBytes();
    }

    @Override
    public Optional<StreamWorkspaces> workspaces() {
        return Optional.ofNullable(workspaces);
    }

    /**
     * Frees every plan and gives the workspaces back to the pool. Streams must be idle (their requests finished);
     * call before the pool and the device close.
     */
    @Override
    public void close() {
        closed = true;
        List<RuntimeException> failures = new ArrayList<>();
        for (StreamState state : streams.values()) {
            state.plans.forEach(plan -> {
                if (plan == DECLINED || plan == OWN_KERNELS) {
                    return;
                }
                try {
                    plan.close();
                } catch (RuntimeException e) {
                    failures.add(e);
                }
            });
        }
        streams.clear();
        tuned.clear();
        if (workspaces != null) {
            try {
                workspaces.close();
            } catch (RuntimeException e) {
                failures.add(e);
            }
        }
        if (!failures.isEmpty()) {
            RuntimeException first = failures.getFirst();
            failures.subList(1, failures.size()).forEach(first::addSuppressed);
            throw first;
        }
    }

    private static int passBlocks(long count) {
        return (int) Math.min(SPLIT_K_PASS_MAX_BLOCKS, ceilDiv(count, 256));
    }

    /**
     * K slices for a product of {@code tiles} output tiles and inner size {@code in}: below 2 means no split
     * (package-private for tests; see the class comment for the rule).
     */
    static int splitSlices(long tiles, int in) {
        if (tiles >= SPLIT_K_TARGET_BLOCKS) {
            return 1;
        }
        long slices = Math.min(SPLIT_K_MAX, Math.min(SPLIT_K_TARGET_BLOCKS / tiles, in / SPLIT_K_MIN_CHUNK));
        if (slices < 2) {
            return 1;
        }
        return ceilDiv(in, splitChunk(in, (int) slices));
    }

    /** K columns per slice: ⌈in / slices⌉ rounded up to a multiple of 16. */
    static int splitChunk(int in, int slices) {
        return ceilDiv(ceilDiv(in, slices), 16) * 16;
    }

    /** The GEMM kernel for this precision and shape (package-private for tests). */
    KernelFunction gemmKernel(int rows, int in, int out) {
        if (precision == Precision.FP32 || in % 4 != 0) {
            return gemmF32;
        }
        long largeTiles = (long) ceilDiv(out, 128) * ceilDiv(rows, 128);
        return largeTiles >= LARGE_TILE_MIN_BLOCKS ? gemmLarge : gemmSmall;
    }

    @Override
    public long attentionWorkspaceBytes(int batch, int seq, int heads, int headDim) {
        if (bf16Activations && headDim != 64) {
            return 4L * batch * seq * heads * headDim * Float.BYTES;   // FP32 qkv (3 parts) and FP32 context
        }
        return 0;
    }

    @Override
    public void attention(DeviceStream stream, long qkv, long attentionMask, long workspace, long context, int batch,
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
            launch(stream, bf16ToF32, passBlocks(3 * width), 1, 1, 256, 1, 1, 0, qkv, wideQkv, 3 * width);
            fp32Attention(stream, wideQkv, attentionMask, wideContext, batch, seq, heads, headDim);
            launch(stream, f32ToBf16, passBlocks(width), 1, 1, 256, 1, 1, 0, wideContext, context, width);
            return;
        }
        if (bf16Activations && attentionKernels == AttentionKernels.TILED) {
            boolean wide = (long) ceilDiv(seq, 128) * heads * batch >= FLASH_WIDE_MIN_BLOCKS;
            launch(stream, wide ? flashWide : flashNarrow, ceilDiv(seq, wide ? 128 : 64), heads, batch, wide ? 256 : 128,
                    1, 1, 0, qkv, attentionMask, context, seq, heads);
            return;
        }
        if (bf16Activations) {
            launch(stream, attentionBf16io, ceilDiv(seq, 64), heads, batch, 128, 1, 1, 0, qkv, attentionMask, context,
                    seq, heads);
            return;
        }
        boolean tensorCores = precision == Precision.BF16 || precision == Precision.TF32 && tf32Attention;
        if (tensorCores && headDim == 64 && (qkv & 15) == 0) {
            launch(stream, precision == Precision.BF16 ? attentionBf16 : attentionTf32, ceilDiv(seq, 64), heads, batch,
                    128, 1, 1, 0, qkv, attentionMask, context, seq, heads);
            return;
        }
        fp32Attention(stream, qkv, attentionMask, context, batch, seq, heads, headDim);
    }

    private void fp32Attention(DeviceStream stream, long qkv, long attentionMask, long context, int batch, int seq,
                               int heads, int headDim) {
        if (headDim == 64 && attentionKernels == AttentionKernels.TILED && (qkv & 15) == 0 && (context & 15) == 0) {
            launch(stream, attentionTiled, ceilDiv(seq, 64), heads, batch, 128, 1, 1, 0, qkv, attentionMask, context,
                    seq, heads);
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
        launch(stream, kernel, ceilDiv(seq, 32), heads, batch, 128, 1, 1, 0,
                qkv, attentionMask, context, seq, heads, headDim);
    }

    @Override
    public void addLayerNorm(DeviceStream stream, long x, long residual, long gamma, long beta, long y, int rows,
                             int cols, float eps) {
        positive("rows", rows);
        positive("cols", cols);
        pointer("x", x);
        pointer("gamma", gamma);
        pointer("beta", beta);
        pointer("y", y);
        if (!(eps > 0)) {
            throw new IllegalArgumentException("eps must be positive, got " + eps);
        }
        if (warpRows(cols, x | residual | gamma | beta | y)) {
            launch(stream, bf16Activations ? addLayerNormWarpBf16 : addLayerNormWarp, ceilDiv(rows, WARP_ROW_BLOCK / 32),
                    1, 1, WARP_ROW_BLOCK, 1, 1, 0, x, residual, gamma, beta, y, rows, cols, eps);
            return;
        }
        KernelFunction kernel = !bf16Activations ? addLayerNorm
                : cols <= LAYER_NORM_REGISTER_COLUMNS * rowBlock(cols) ? addLayerNormBf16Reg : addLayerNormBf16;
        launch(stream, kernel, rows, 1, 1, rowBlock(cols), 1, 1, 0, x, residual, gamma, beta, y, cols, eps);
    }

    /**
     * Whether a LayerNorm over rows of {@code cols} runs on the warp-per-row kernels: opted in, the row a whole number
     * of 32-lane chunks of 16-byte vectors ({@code 16 / activationBytes()} elements), at most
     * {@link #WARP_LAYER_NORM_MAX_CHUNKS} of them, and every pointer ({@code pointers} OR-ed) 16-byte aligned.
     */
    private boolean warpRows(int cols, long pointers) {
        if (!warpLayerNorm || (pointers & 15) != 0) {
            return false;
        }
        int chunk = 32 * (16 / activationBytes());
        return cols % chunk == 0 && cols / chunk <= WARP_LAYER_NORM_MAX_CHUNKS;
    }

    /**
     * With the library and {@link Options#residualInGemm()}: the product adds the residual itself (one library call
     * writing {@code x·wᵀ + bias + residual} into y), then LayerNorm of y in place; otherwise, or where the library
     * declines the shape or the pointers, the product and then add+LayerNorm as the interface's default.
     */
    @Override
    public void linearAddLayerNorm(DeviceStream stream, long x, long weight, long bias, long residual, long gamma,
                                   long beta, long y, int rows, int in, int out, float eps) {
        positive("rows", rows);
        positive("in", in);
        positive("out", out);
        pointer("x", x);
        pointer("weight", weight);
        pointer("residual", residual);
        pointer("y", y);
        aligned("x", x);
        aligned("weight", weight);
        aligned("y", y);
        if (residualInGemm && usesLibrary()
                && libraryProduct(stream, x, weight, bias, residual, y, rows, in, out, Activation.NONE)) {
            addLayerNorm(stream, y, 0, gamma, beta, y, rows, out, eps);
            return;
        }
        linear(stream, x, weight, bias, y, rows, in, out, Activation.NONE);
        addLayerNorm(stream, y, residual, gamma, beta, y, rows, out, eps);
    }

    @Override
    public void pool(DeviceStream stream, long hidden, long attentionMask, long out, int batch, int seq, int cols,
                     Pooling pooling) {
        positive("batch", batch);
        positive("seq", seq);
        positive("cols", cols);
        pointer("hidden", hidden);
        pointer("out", out);
        switch (Objects.requireNonNull(pooling, "pooling")) {
            case CLS -> launch(stream, bf16Activations ? poolClsBf16 : poolCls, batch, 1, 1, rowBlock(cols), 1, 1, 0,
                    hidden, out, seq, cols);
            case MEAN -> launch(stream, bf16Activations ? poolMeanBf16 : poolMean, batch, 1, 1, rowBlock(cols), 1, 1,
                    0, hidden, attentionMask, out, seq, cols);
        }
    }

    @Override
    public void softmax(DeviceStream stream, long x, long y, int rows, int cols) {
        if (bf16Activations) {
            throw new UnsupportedOperationException("softmax runs on FP32 data only; these ops hold bf16 activations");
        }
        positive("rows", rows);
        positive("cols", cols);
        pointer("x", x);
        pointer("y", y);
        launch(stream, softmaxRows, rows, 1, 1, rowBlock(cols), 1, 1, 0, x, y, cols);
    }

    /** Threads for a row kernel: the row length rounded up to a warp, at most {@link #ROW_BLOCK}. */
    static int rowBlock(int cols) {
        return Math.min(ROW_BLOCK, (cols + 31) / 32 * 32);
    }

    private static int ceilDiv(int a, int b) {
        return (a + b - 1) / b;
    }

    private static long ceilDiv(long a, long b) {
        return (a + b - 1) / b;
    }

    private static void positive(String name, int value) {
        if (value <= 0) {
            throw new IllegalArgumentException(name + " must be positive, got " + value);
        }
    }

    private static void aligned(String name, long address) {
        if ((address & 15) != 0) {
            throw new IllegalArgumentException(name + " must be 16-byte aligned, got 0x" + Long.toHexString(address));
        }
    }

    private static void pointer(String name, long address) {
        if (address == 0) {
            throw new IllegalArgumentException(name + " must be a device address, got 0");
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
