package io.gpupool.kernels.cuda;

/** How {@link CudaTensorOps#linear} multiplies (and in which type the activations live; see CudaTensorOps). */
public enum Precision { FP32, TF32, BF16, TF32X3 }
