package io.gpupool.backend;

import java.util.List;

/**
 * A source of compute devices: CUDA GPUs through JCuda ({@code backend/cuda}) or the host-memory
 * backend ({@code backend/host}) that runs everywhere. The configuration layer picks one
 * ({@code gpupool.backend: auto | cuda | host}).
 */
public interface ComputeBackend extends AutoCloseable {

    /** "cuda" or "host". */
    String name();

    /** The devices this backend drives, indexed 0..n-1. Never empty. */
    List<ComputeDevice> devices();

    /** Releases every device resource (contexts, streams, modules). */
    @Override
    void close();
}
