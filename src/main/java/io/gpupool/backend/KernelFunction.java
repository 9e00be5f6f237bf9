package io.gpupool.backend;

/** A kernel that can be launched with {@link DeviceStream#launch}. */
public interface KernelFunction {

    String name();
}
