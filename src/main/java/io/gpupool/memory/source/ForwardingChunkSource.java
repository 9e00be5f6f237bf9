package io.gpupool.memory.source;

import io.gpupool.memory.ChunkSource;

import java.util.Objects;

/**
 * A {@link ChunkSource} that passes every call to an upstream source: the base of the decorators,
 * each of which overrides only the calls its concern touches (the limit, statistics, fault
 * injection, trace recording).
 *
 * <p>{@link #map(long, long)} is passed on as {@link #map(long, long, long)} with the granularity as
 * the extent (what a map without extents means), so a decorator overrides the three-argument form
 * alone and sees every map.
 */
public abstract class ForwardingChunkSource implements ChunkSource {

    protected final ChunkSource upstream;

    protected ForwardingChunkSource(ChunkSource upstream) {
        this.upstream = Objects.requireNonNull(upstream, "upstream");
    }

    @Override
    public long allocate(long bytes) {
        return upstream.allocate(bytes);
    }

    @Override
    public void free(long address, long bytes) {
        upstream.free(address, bytes);
    }

    @Override
    public long capacityBytes() {
        return upstream.capacityBytes();
    }

    @Override
    public String name() {
        return upstream.name();
    }

    @Override
    public boolean supportsMapping() {
        return upstream.supportsMapping();
    }

    @Override
    public long mappingGranularity() {
        return upstream.mappingGranularity();
    }

    @Override
    public long reserveAddressSpace(long bytes) {
        return upstream.reserveAddressSpace(bytes);
    }

    @Override
    public void releaseAddressSpace(long address, long bytes) {
        upstream.releaseAddressSpace(address, bytes);
    }

    @Override
    public void map(long address, long bytes) {
        map(address, bytes, mappingGranularity());
    }

    @Override
    public void map(long address, long bytes, long extentBytes) {
        upstream.map(address, bytes, extentBytes);
    }

    @Override
    public void unmap(long address, long bytes) {
        upstream.unmap(address, bytes);
    }
}
