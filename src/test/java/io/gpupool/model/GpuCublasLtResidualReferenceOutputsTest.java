package io.gpupool.model;

import io.gpupool.kernels.cuda.KernelOptions;
import org.junit.jupiter.api.Tag;

/**
 * The reference outputs on cuBLASLt in FP32 with the opt-in kernel paths on: the residual added in the output
 * projections' products and the warp-per-row LayerNorm (the fixtures' hidden size 32 keeps LayerNorm on the block
 * kernels, so this holds the residual path to transformers' 1e-4).
 */
@Tag("gpu")
class GpuCublasLtResidualReferenceOutputsTest extends GpuCublasLtReferenceOutputsTest {

    @Override
    KernelOptions options() {
        return new KernelOptions(false, true, true);
    }
}
