package io.gpupool.backend.cuda;

import jcuda.NativePointerObject;
import jcuda.Pointer;
import jcuda.driver.CUstream;

import static jcuda.driver.JCudaDriver.cuLaunchKernel;

/**
 * Launches through JCuda's {@code cuLaunchKernel}: each argument becomes a {@link Pointer} to a one-element
 * array, and JCuda's native side walks that array of objects to build the driver's parameter array. The fallback
 * where {@link LibCudaLaunch} cannot be bound, and the baseline of {@code LaunchBench}.
 */
final class JCudaKernelLauncher implements KernelLauncher {

    private final CUstream stream;

    JCudaKernelLauncher(CUstream stream) {
        this.stream = stream;
    }

    @Override
    public int launch(CudaFunction kernel, int gridX, int gridY, int gridZ, int blockX, int blockY, int blockZ,
                      int sharedMemoryBytes, Object[] arguments) {
        NativePointerObject[] parameters = new NativePointerObject[arguments.length];
        for (int i = 0; i < arguments.length; i++) {
            parameters[i] = switch (arguments[i]) {
                case Long value -> Pointer.to(new long[] {value});
                case Integer value -> Pointer.to(new int[] {value});
                case Float value -> Pointer.to(new float[] {value});
                case null, default -> throw KernelLauncher.invalidArgument(kernel.name(), i, arguments[i]);
            };
        }
        return cuLaunchKernel(kernel.handle(), gridX, gridY, gridZ, blockX, blockY, blockZ, sharedMemoryBytes,
                stream, Pointer.to(parameters), null);
    }

    @Override
    public String path() {
        return "jcuda";
    }
}
