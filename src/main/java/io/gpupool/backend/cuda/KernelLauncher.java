package io.gpupool.backend.cuda;

/**
 * How one {@link CudaStream} hands a kernel launch to the driver. Two paths, chosen once per process:
 * {@link FfmKernelLauncher} (the driver's {@code cuLaunchKernel} bound through FFM, arguments written into the
 * stream's own native buffer) wherever {@link LibCudaLaunch} could be bound, else {@link JCudaKernelLauncher}
 * (JCuda's JNI binding, which marshals a tree of Java objects per launch).
 *
 * <p>A launcher belongs to one stream. The stream has validated the arguments ({@link #checkArguments}), made its
 * context current and checked for graph capture before it calls {@link #launch}; the launcher only marshals the
 * arguments and makes the driver call.
 */
interface KernelLauncher {

    /**
     * Enqueues {@code kernel} on the launcher's stream; returns the driver's CUresult. {@code arguments} passed
     * {@link #checkArguments}.
     */
    int launch(CudaFunction kernel, int gridX, int gridY, int gridZ, int blockX, int blockY, int blockZ,
               int sharedMemoryBytes, Object[] arguments);

    /** "ffm" or "jcuda": which path this launcher takes (logs, tests, benchmarks). */
    String path();

    /** The preferred launcher for {@code stream}: through FFM where the binding could be made, else through JCuda. */
    static KernelLauncher forStream(Cu.StreamHandle stream) {
        return LibCudaLaunch.get().<KernelLauncher>map(driver -> new FfmKernelLauncher(driver, stream.address()))
                .orElseGet(() -> new JCudaKernelLauncher(stream));
    }

    /**
     * Rejects what a kernel parameter cannot be: null, or anything but {@link Long}, {@link Integer} and
     * {@link Float}. The message names the argument's position and the kernel.
     */
    static void checkArguments(String kernel, Object[] arguments) {
        for (int i = 0; i < arguments.length; i++) {
            Object argument = arguments[i];
            if (!(argument instanceof Long || argument instanceof Integer || argument instanceof Float)) {
                throw invalidArgument(kernel, i, argument);
            }
        }
    }

    static IllegalArgumentException invalidArgument(String kernel, int index, Object argument) {
        return argument == null
                ? new IllegalArgumentException("argument " + index + " of " + kernel + " is null")
                : new IllegalArgumentException("argument " + index + " of " + kernel + " is a "
                + argument.getClass().getSimpleName() + "; kernels take Long, Integer or Float");
    }
}
