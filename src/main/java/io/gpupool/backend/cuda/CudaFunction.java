package io.gpupool.backend.cuda;

import io.gpupool.backend.KernelFunction;

/** A kernel of a {@link CudaModule}, bound to the device it was loaded on. */
record CudaFunction(CudaDevice device, String name, Cu.FunctionHandle handle) implements KernelFunction {

    /** The CUfunction as a raw address, for launches bound through FFM. */
    long nativeHandle() {
        return handle.address();
    }

    @Override
    public String toString() {
        return "kernel " + name + " on " + device.label();
    }
}
