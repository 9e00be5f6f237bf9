package io.gpupool.serving;

import java.util.List;

/**
 * Where served models come from. The configuration adapts the model repository to this; tests add
 * their own. Every source bean contributes to one {@link ModelRegistry}.
 */
@FunctionalInterface
public interface ModelSource {

    /**
     * Loads this source's models on every device (weights from each worker's weights allocator).
     * A model that cannot be loaded is returned as a failure, never thrown.
     */
    Loaded load(List<DeviceRuntime> devices);

    /** What a source produced. */
    record Loaded(List<ServedModel> models, List<ModelFailure> failures) {

        public Loaded {
            models = List.copyOf(models);
            failures = List.copyOf(failures);
        }
    }
}
