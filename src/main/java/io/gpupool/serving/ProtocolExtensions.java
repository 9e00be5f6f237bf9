package io.gpupool.serving;

/** The handlers of the Triton extensions the server offers beside the core protocol. */
public record ProtocolExtensions(StatisticsHandler statistics, ModelConfigHandler configuration,
                                 SharedMemoryHandler sharedMemory, RepositoryHandler repository) {
}
