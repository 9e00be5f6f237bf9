package io.gpupool.config;

import java.nio.file.Path;

/** Validated {@code gpupool.models.*}. */
public record ModelsSettings(Path path) {

    public ModelsSettings {
        if (path == null || path.toString().isBlank()) {
            throw new IllegalArgumentException("gpupool.models.path must name a folder, was '" + path + "'");
        }
    }
}
