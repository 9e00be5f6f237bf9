package io.gpupool.model;

import io.gpupool.kernels.cuda.Precision;
import org.junit.jupiter.api.Tag;

/**
 * The same reference outputs with the linear layers on the tensor cores as three TF32 products
 * ({@code gpupool.kernels.precision=TF32X3}): the claim that this precision is near FP32 means it meets the FP32
 * contract of 1e-4 against transformers too.
 */
@Tag("gpu")
class GpuTf32x3ReferenceOutputsTest extends GpuReferenceOutputsTest {

    @Override
    protected Precision precision() {
        return Precision.TF32X3;
    }
}
