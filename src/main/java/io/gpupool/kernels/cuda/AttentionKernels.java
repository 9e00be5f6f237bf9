package io.gpupool.kernels.cuda;

/** Which generation of the head-size-64 attention kernels runs (see CudaAttentionOps). */
public enum AttentionKernels {
    /** {@code attention_d64} (FP32) and {@code attention_bf16io_d64} (bf16 activations). */
    CLASSIC,
    /** {@code attention_d64_tiled} (FP32) and {@code flash_attention_bf16io_d64_q{64,128}} (bf16 activations). */
    TILED
}
