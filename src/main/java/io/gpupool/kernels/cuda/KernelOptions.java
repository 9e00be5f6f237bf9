package io.gpupool.kernels.cuda;

/**
 * Kernel paths an operator can switch; {@link #DEFAULT} has on what a GPU run verified (docs/benchmarks.md,
 * "LayerNorm kernels and the residual in the GEMM").
 *
 * @param packedBf16     on bf16 activations, offer the packed-sequence ops in their bf16 forms, so that batches
 *                       are packed rather than padded (no effect on FP32 activations)
 * @param residualInGemm with the library: {@link CudaTensorOps#linearAddLayerNorm} adds the residual in the product (cuBLASLt's
 *                       C operand, beta = 1) and then normalises alone, instead of a separate add in the LayerNorm
 * @param warpLayerNorm  LayerNorm, add+LayerNorm and embeddings+LayerNorm on the warp-per-row kernels (16-byte
 *                       loads, the row in registers) where the row length and alignment allow
 * @param tuneGemms      with the library: each product shape, on its first run, times the library's first
 *                       {@link #TUNING_CANDIDATES} algorithms and gpupool's own kernel on the stream and keeps the
 *                       fastest for every stream (see "Choosing per shape" in LibraryGemm)
 */
public record KernelOptions(boolean packedBf16, boolean residualInGemm, boolean warpLayerNorm, boolean tuneGemms) {
    /** The verified defaults: warp-per-row LayerNorm on; packed bf16, the residual in the GEMM, tuning off. */
    public static final KernelOptions DEFAULT = new KernelOptions(false, false, true, false);
    /** Everything off: the block-per-row LayerNorm kernels and the add in the LayerNorm. */
    public static final KernelOptions NONE = new KernelOptions(false, false, false, false);
    /** Library algorithms a tuned shape asks the heuristic for (its first choice among them). */
    public static final int TUNING_CANDIDATES = 8;

    /** Without GEMM tuning: products run the library heuristic's first choice. */
    public KernelOptions(boolean packedBf16, boolean residualInGemm, boolean warpLayerNorm) {
        this(packedBf16, residualInGemm, warpLayerNorm, false);
    }
}
