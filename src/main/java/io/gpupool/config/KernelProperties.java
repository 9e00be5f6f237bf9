package io.gpupool.config;

import io.gpupool.kernels.cuda.CudaTensorOps.Precision;
import org.springframework.boot.context.properties.ConfigurationProperties;

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

    public Precision getPrecision() {
        return precision;
    }

    public void setPrecision(Precision precision) {
        if (precision == null) {
            throw new IllegalArgumentException("gpupool.kernels.precision must be one of FP32, TF32, BF16, TF32X3");
        }
        this.precision = precision;
    }
}
