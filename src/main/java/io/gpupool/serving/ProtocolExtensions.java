package io.gpupool.serving;

import java.util.ArrayList;
import java.util.List;

/** The handlers of the Triton extensions the server offers beside the core protocol. */
public record ProtocolExtensions(StatisticsHandler statistics, ModelConfigHandler configuration,
                                 SharedMemoryHandler sharedMemory, RepositoryHandler repository) {

    /** The extension names {@code GET /v2} lists, as Triton names them (shared memory is not offered). */
    public List<String> names() {
        List<String> names = new ArrayList<>(List.of("model_configuration", "statistics"));
        if (repository.enabled()) {
            names.add("model_repository");
        }
        return names;
    }
}
