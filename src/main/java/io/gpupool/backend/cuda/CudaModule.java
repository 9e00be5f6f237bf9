package io.gpupool.backend.cuda;

import io.gpupool.backend.KernelFunction;
import io.gpupool.backend.KernelModule;
import jcuda.driver.CUfunction;
import jcuda.driver.CUmodule;
import jcuda.driver.CUresult;

import static jcuda.driver.JCudaDriver.cuModuleGetFunction;

/** A PTX module loaded into a device's primary context with cuModuleLoadData. */
final class CudaModule implements KernelModule {

    private final CudaDevice device;
    private final String name;
    private final CUmodule module;

    CudaModule(CudaDevice device, String name, CUmodule module) {
        this.device = device;
        this.name = name;
        this.module = module;
    }

    CUmodule handle() {
        return module;
    }

    @Override
    public KernelFunction function(String kernel) {
        device.makeCurrent();
        CUfunction function = new CUfunction();
        int result = cuModuleGetFunction(function, module, kernel);
        if (result == CUresult.CUDA_ERROR_NOT_FOUND) {
            throw new IllegalArgumentException("module " + name + " has no kernel named '" + kernel
                    + "' (is it declared extern \"C\"?)");
        }
        Cu.check("cuModuleGetFunction", result, kernel + " in module " + name);
        return new CudaFunction(device, kernel, function);
    }

    @Override
    public String toString() {
        return "module " + name + " on " + device.label();
    }
}
