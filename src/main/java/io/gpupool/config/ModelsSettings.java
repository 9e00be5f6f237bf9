package io.gpupool.config;

import java.nio.file.Path;

/** Validated {@code gpupool.models.*}. */
public record ModelsSettings(Path path, Control control) {

    /** Whether clients may load and unload models at run time (Triton's model control modes). */
    public enum Control { NONE, EXPLICIT }

    public ModelsSettings {
        if (path == null || path.toString().isBlank()) {
            throw new IllegalArgumentException("gpupool.models.path must name a folder, was '" + path + "'");
        }
        if (control == null) {
            throw new IllegalArgumentException("gpupool.models.control must be none or explicit");
        }
    }
}
