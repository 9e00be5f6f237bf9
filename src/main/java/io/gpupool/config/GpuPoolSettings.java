package io.gpupool.config;

import java.util.Objects;

/** The validated, immutable {@code gpupool.*} configuration the application runs with. */
public record GpuPoolSettings(GpuPoolProperties.Backend backend, MemorySettings memory, ServingSettings serving,
                             ModelsSettings models) {

    public GpuPoolSettings {
        Objects.requireNonNull(backend, "gpupool.backend must be one of auto, cuda, host");
        Objects.requireNonNull(memory, "memory");
        Objects.requireNonNull(serving, "serving");
        Objects.requireNonNull(models, "models");
    }
}
