package io.gpupool.backend.cuda;

import io.gpupool.backend.KernelFunction;
import jcuda.driver.CUfunction;

/** A kernel of a {@link CudaModule}, bound to the device it was loaded on. */
record CudaFunction(CudaDevice device, String name, CUfunction handle) implements KernelFunction {

    @Override
    public String toString() {
        return "kernel " + name + " on " + device.label();
    }
}
