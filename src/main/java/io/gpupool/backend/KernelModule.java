package io.gpupool.backend;

/** A loaded module of device kernels. */
public interface KernelModule {

    /** Looks up a kernel by its (extern "C") name; fails with a message naming it if absent. */
    KernelFunction function(String name);
}
