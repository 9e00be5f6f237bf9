package io.gpupool.config;

import io.gpupool.backend.ComputeDevice;
import io.gpupool.backend.MatmulLibrary;
import io.gpupool.kernels.cuda.CudaTensorOps;
import io.gpupool.kernels.cuda.GemmEngine;
import io.gpupool.memory.DeviceAllocator;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.util.Optional;

/** Chooses a CUDA device's kernels from {@code gpupool.kernels.*}: which GEMM engine, which precision. */
final class KernelSelection {

    private static final Logger log = LoggerFactory.getLogger(KernelSelection.class);

    private KernelSelection() {
    }

    /**
     * The CUDA kernels for {@code device}: cuBLASLt (workspaces from {@code activations}, the device's pool) unless
     * the engine is OWN or, under AUTO, the library cannot be loaded (the device logs why).
     *
     * @throws IllegalStateException under CUBLASLT when the library cannot be loaded
     */
    static CudaTensorOps cudaOps(ComputeDevice device, KernelProperties kernels, DeviceAllocator activations) {
        Optional<MatmulLibrary> library = kernels.getGemmEngine() == GemmEngine.OWN ? Optional.empty()
                : device.matmulLibrary(kernels.getCublasLtDir());
        if (library.isEmpty() && kernels.getGemmEngine() == GemmEngine.CUBLASLT) {
            throw new IllegalStateException("gpupool.kernels.gemm-engine=CUBLASLT but cuBLASLt could not be loaded on "
                    + "device " + device.index() + " (see the log line above; set gpupool.kernels.cublas-lt-dir, or "
                    + "use AUTO or OWN)");
        }
        CudaTensorOps ops = new CudaTensorOps(device, kernels.getPrecision(), library.orElse(null), activations,
                kernels.kernelOptions(), kernels.getAttention());
        log.info("Device {}: linear layers on {}, precision {}, activations {}, attention kernels {}{}{}{}{}", device.index(),
                ops.gemmEngine(), ops.precision(), ops.activationBytes() == 2 ? "bf16" : "fp32", ops.attentionKernels(),
                kernels.isPackedBf16() && ops.activationBytes() == 2 ? ", packed bf16 batches (unverified kernels)" : "",
                kernels.isResidualInGemm() && library.isPresent() ? ", residual added in the GEMM" : "",
                kernels.isWarpLayerNorm() ? ", warp-per-row LayerNorm" : "",
                kernels.isGemmTuning() && library.isPresent() ? ", each GEMM shape measured on its first run" : "");
        return ops;
    }
}
