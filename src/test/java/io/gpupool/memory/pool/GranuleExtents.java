package io.gpupool.memory.pool;

import io.gpupool.memory.PoolConfig;

/**
 * The pool's defaults with mapped extents of one minimum block (2 MiB), for tests that count mapped bytes,
 * maps and unmaps per unit: with the default larger extents a run maps its neighbours' units too.
 * {@code MappedExtentsTest} covers the larger extents themselves.
 */
final class GranuleExtents {

    private GranuleExtents() {
    }

    static PoolConfig defaults() {
        return PoolConfig.defaults().withMappedExtentBytes(2 * PoolConfig.MIB);
    }
}
