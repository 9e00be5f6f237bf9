package io.gpupool.config;

import io.gpupool.kernels.cuda.KernelOptions;
import io.gpupool.kernels.cuda.AttentionKernels;
import io.gpupool.kernels.cuda.GemmEngine;
import io.gpupool.kernels.cuda.Precision;
import org.springframework.boot.context.properties.ConfigurationProperties;

import java.nio.file.Path;
import java.time.Duration;

/**
 * {@code gpupool.kernels.*}: how the CUDA kernels compute. Kept apart from {@link GpuPoolProperties} so that
 * it can grow without touching the memory and serving settings. Has no effect on the host backend, whose
 * kernels always compute in FP32.
 */
@ConfigurationProperties("gpupool.kernels")
public class KernelProperties {

    /**
     * Precision of the linear layers (and, for BF16 with head size 64, of attention) on CUDA devices: FP32 (exact
     * single precision on the CUDA cores; outputs match transformers within 1e-4), TF32 or BF16 (tensor cores with
     * FP32 accumulation, about 1e-3 relative error), or TF32X3 (three TF32 tensor-core products per multiply:
     * near FP32 accuracy). Speed and accuracy of each: docs/benchmarks.md, "Compute".
     */
    private Precision precision = Precision.FP32;

    /**
     * Who multiplies the linear layers on CUDA devices: AUTO (NVIDIA's cuBLASLt where it can be loaded, else
     * gpupool's own kernels, with one log line saying why), CUBLASLT (the library or the server does not start) or
     * OWN (gpupool's kernels). With cuBLASLt and precision BF16, activations and linear weights are held in bf16.
     */
    private GemmEngine gemmEngine = GemmEngine.AUTO;

    /**
     * Folder holding {@code libcublasLt.so.13} (e.g. {@code /usr/local/cuda-13.0/targets/x86_64-linux/lib});
     * unset: the dynamic linker's search, then the CUDA toolkit's usual folders. Also settable as the system
     * property {@code -Dgpupool.kernels.cublas-lt-dir=...}.
     */
    private Path cublasLtDir;

    /**
     * How long a device must have had no request before its streams' library workspaces (cuBLASLt's, one pool block
     * per stream) go back to the pool, to be taken again by the next product; 0 keeps them until a trim
     * ({@code DELETE /actuator/gpupool}) or shutdown. A graph that captured a workspace pins it either way.
     */
    private Duration workspaceReleaseAfterIdle = Duration.ZERO;

    /**
     * With precision BF16 on cuBLASLt (bf16 activations): pack a batch of BERT requests without padding, on the bf16
     * forms of the packed-sequence kernels (FP32 attention over bf16 loads and stores), instead of padding it to its
     * longest sequence. Off by default: it agrees with the padded path within bf16's reach but is the slower of the
     * two for short requests (docs/benchmarks.md, "where the host time went"). No effect on FP32 activations.
     */
    private boolean packedBf16 = false;

    /**
     * Which head-size-64 attention kernels run on CUDA devices (BERT-base and most BERT-family models; other head
     * sizes always run the classic ones): CLASSIC or TILED (register-tiled FP32 attention; on bf16 activations a
     * flash-attention kernel that streams K and V behind the tensor-core math). Same results within rounding, same
     * masking; TILED is the faster at every measured BERT shape (docs/benchmarks.md).
     */
    private AttentionKernels attention = AttentionKernels.TILED;

    public AttentionKernels getAttention() {
        return attention;
    }

    public void setAttention(AttentionKernels attention) {
        if (attention == null) {
            throw new IllegalArgumentException("gpupool.kernels.attention must be one of CLASSIC, TILED");
        }
        this.attention = attention;
    }

    /**
     * On cuBLASLt: a transformer's output projections add the residual in the product itself (cuBLASLt's C operand
     * with beta = 1), leaving the LayerNorm alone, one launch fewer per projection (two per BERT layer). Off by
     * default: correct, but no faster at the large token counts where a forward spends its time (docs/benchmarks.md,
     * "Residual in the GEMM"); without the library the residual is added in the LayerNorm either way.
     */
    private boolean residualInGemm = false;

    /**
     * LayerNorm, add+LayerNorm and embeddings+LayerNorm on the warp-per-row kernels (16-byte loads, each row in
     * registers, FP32 statistics) where the hidden size allows (a multiple of 128 for FP32 activations, 256 for bf16,
     * up to 1024 / 2048); the block-per-row kernels otherwise, or everywhere when false. On by default: verified on a GPU
     * and faster than the block-per-row kernels at large row counts (docs/benchmarks.md, "LayerNorm kernels").
     */
    private boolean warpLayerNorm = true;

    /**
     * On cuBLASLt: each product shape, the first time it runs (the warm-up runs every model at its largest size and at the
     * graph buckets' shapes, so those are measured before the first request), times the
     * library's first 8 algorithms and gpupool's own kernel for it on the stream and keeps the fastest for every
     * stream; the choices show on {@code /actuator/gpupool} (kernels.gemmChoices). Off by default until the H200
     * showed it helps (docs/benchmarks.md); off, every product runs the heuristic's first choice.
     */
    private boolean gemmTuning = false;

    public boolean isGemmTuning() {
        return gemmTuning;
    }

    public void setGemmTuning(boolean gemmTuning) {
        this.gemmTuning = gemmTuning;
    }

    public boolean isResidualInGemm() {
        return residualInGemm;
    }

    public void setResidualInGemm(boolean residualInGemm) {
        this.residualInGemm = residualInGemm;
    }

    public boolean isWarpLayerNorm() {
        return warpLayerNorm;
    }

    public void setWarpLayerNorm(boolean warpLayerNorm) {
        this.warpLayerNorm = warpLayerNorm;
    }

    /** The opt-in kernel paths as the CUDA ops take them. */
    public KernelOptions kernelOptions() {
        return new KernelOptions(packedBf16, residualInGemm, warpLayerNorm, gemmTuning);
    }

    public boolean isPackedBf16() {
        return packedBf16;
    }

    public void setPackedBf16(boolean packedBf16) {
        this.packedBf16 = packedBf16;
    }

    public Precision getPrecision() {
        return precision;
    }

    public GemmEngine getGemmEngine() {
        return gemmEngine;
    }

    public void setGemmEngine(GemmEngine gemmEngine) {
        if (gemmEngine == null) {
            throw new IllegalArgumentException("gpupool.kernels.gemm-engine must be one of AUTO, CUBLASLT, OWN");
        }
        this.gemmEngine = gemmEngine;
    }

    public Path getCublasLtDir() {
        return cublasLtDir;
    }

    public void setCublasLtDir(Path cublasLtDir) {
        this.cublasLtDir = cublasLtDir;
    }

    public Duration getWorkspaceReleaseAfterIdle() {
        return workspaceReleaseAfterIdle;
    }

    public void setWorkspaceReleaseAfterIdle(Duration workspaceReleaseAfterIdle) {
        if (workspaceReleaseAfterIdle == null || workspaceReleaseAfterIdle.isNegative()) {
            throw new IllegalArgumentException("gpupool.kernels.workspace-release-after-idle = "
                    + workspaceReleaseAfterIdle + " is invalid; allowed: a duration >= 0 (0: only on a trim)");
        }
        this.workspaceReleaseAfterIdle = workspaceReleaseAfterIdle;
    }

    public void setPrecision(Precision precision) {
        if (precision == null) {
            throw new IllegalArgumentException("gpupool.kernels.precision must be one of FP32, TF32, BF16, TF32X3");
        }
        this.precision = precision;
    }
}
