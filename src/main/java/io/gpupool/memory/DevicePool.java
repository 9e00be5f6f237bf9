package io.gpupool.memory;

import io.gpupool.memory.metric.PoolMetrics;

/** The two-level device memory pool (skeleton: API only, implementation follows). */
public final class DevicePool implements DeviceAllocator {

    private final ChunkSource source;
    private volatile PoolConfig config;

    public DevicePool(ChunkSource source, PoolConfig config) {
        this.source = java.util.Objects.requireNonNull(source, "source");
        this.config = java.util.Objects.requireNonNull(config, "config");
    }

    @Override
    public DeviceBlock allocate(long bytes, AllocationStream stream) {
        throw new UnsupportedOperationException("not implemented yet");
    }

    @Override
    public AllocatorMode mode() {
        return config.mode();
    }

    @Override
    public PoolMetrics metrics() {
        throw new UnsupportedOperationException("not implemented yet");
    }

    /** The configuration in force (changes with {@link #tune}). */
    public PoolConfig config() {
        return config;
    }

    /**
     * Applies runtime changes; validated as a whole, so a rejected tuning changes nothing.
     *
     * @return the configuration now in force
     * @throws IllegalArgumentException naming the field, value and allowed range
     */
    public PoolConfig tune(PoolTuning tuning) {
        throw new UnsupportedOperationException("not implemented yet");
    }

    /**
     * Empties every local cache, coalesces the global level and returns every empty chunk to the
     * source (waiting for the streams that last used it).
     *
     * @return bytes returned to the source
     */
    public long trim() {
        throw new UnsupportedOperationException("not implemented yet");
    }

    /**
     * Periodic housekeeping: flushes local size classes idle beyond {@code localIdleAge} and returns
     * chunks empty for longer than {@code releaseIdleAge} while reserved stays above
     * {@code releaseThresholdBytes}.
     *
     * @return bytes returned to the source
     */
    public long maintain() {
        throw new UnsupportedOperationException("not implemented yet");
    }

    /**
     * Makes sure at least {@code bytes} are reserved (warm-up sizing, e.g. 1.5 x the largest tensor),
     * growing by one chunk if needed and within the cap.
     *
     * @return bytes newly reserved (0 if enough was reserved already)
     */
    public long reserve(long bytes) {
        throw new UnsupportedOperationException("not implemented yet");
    }

    /** Moves everything cached for {@code stream} to the global level; call when the stream is destroyed. */
    public void detachStream(AllocationStream stream) {
        throw new UnsupportedOperationException("not implemented yet");
    }

    @Override
    public void close() {
        throw new UnsupportedOperationException("not implemented yet");
    }
}
