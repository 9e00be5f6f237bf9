package io.gpupool.kernels.cuda;

import io.gpupool.backend.KernelModule;
import io.gpupool.backend.MatmulLibrary;

/** The no-GPU fakes of this package for tests elsewhere: PTX modules that resolve every kernel they hold, a library. */
public final class FakeCublasLt {

    private static final CudaTensorOpsLaunchTest.RecordingDevice MODULES = new CudaTensorOpsLaunchTest.RecordingDevice();

    private FakeCublasLt() {
    }

    /** A module resolving the kernels {@code image} (PTX text) declares, as a device's loadModule would. */
    public static KernelModule module(String name, byte[] image) {
        synchronized (MODULES) {
            return MODULES.loadModule(name, image);
        }
    }

    /** A cuBLASLt stand-in with a 1 MiB workspace that records its plans and runs. */
    public static MatmulLibrary library() {
        return new CudaTensorOpsLibraryTest.RecordingLibrary();
    }
}
