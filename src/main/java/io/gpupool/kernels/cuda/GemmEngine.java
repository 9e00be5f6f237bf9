package io.gpupool.kernels.cuda;

/**
 * Who multiplies the linear layers: AUTO the vendor library where the device has it, else gpupool's kernels;
 * CUBLASLT the library or fail; OWN always gpupool's kernels.
 */
public enum GemmEngine {
    AUTO, CUBLASLT, OWN;

    /** What {@link CudaTensorOps#gemmEngine()} answers when gpupool's own kernels multiply. */
    public static final String OWN_NAME = "gpupool kernels";
}
