package io.gpupool.actuate;

import java.util.List;

/**
 * The dynamic batcher as the {@code gpupool} endpoint shows it: one descriptor per served model that batches. The
 * serving wiring implements it over the batcher's queues and counters; a read takes no lock and counts nothing.
 */
@FunctionalInterface
public interface ManagedBatching {

    /** No batcher (tests, or a server whose models all run alone). */
    ManagedBatching NONE = List::of;

    /** The models that batch, by name. */
    List<GpuPoolEndpoint.BatchingDescriptor> models();
}
