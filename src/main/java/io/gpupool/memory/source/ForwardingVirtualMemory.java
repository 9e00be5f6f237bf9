package io.gpupool.memory.source;

import io.gpupool.memory.VirtualMemory;

import java.util.Objects;

/**
 * A {@link VirtualMemory} that passes every call to an upstream one: the base of a decorator's view
 * of mapped memory ({@link ForwardingChunkSource#decorate}).
 *
 * <p>{@link #map(long, long)} is passed on as {@link #map(long, long, long)} with the granularity as
 * the extent (what a map without extents means), so a decorator overrides the three-argument form
 * alone and sees every map. The physical calls are passed on one to one; a decorator that cares
 * about memory overrides {@link #createPhysical} and {@link #releasePhysical}, one that cares about
 * mapping {@link #mapPhysical} and {@link #unmapPhysical}.
 */
public class ForwardingVirtualMemory implements VirtualMemory {

    protected final VirtualMemory upstream;

    public ForwardingVirtualMemory(VirtualMemory upstream) {
        this.upstream = Objects.requireNonNull(upstream, "upstream");
    }

    @Override
    public long granularity() {
        return upstream.granularity();
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
    public final void map(long address, long bytes) {
        map(address, bytes, granularity());
    }

    @Override
    public void map(long address, long bytes, long extentBytes) {
        upstream.map(address, bytes, extentBytes);
    }

    @Override
    public void unmap(long address, long bytes) {
        upstream.unmap(address, bytes);
    }

    @Override
    public long createPhysical(long bytes) {
        return upstream.createPhysical(bytes);
    }

    @Override
    public void releasePhysical(long handle) {
        upstream.releasePhysical(handle);
    }

    @Override
    public void mapPhysical(long address, long extentBytes, long[] handles, int count) {
        upstream.mapPhysical(address, extentBytes, handles, count);
    }

    @Override
    public void unmapPhysical(long address, long extentBytes, long[] handles, int count) {
        upstream.unmapPhysical(address, extentBytes, handles, count);
    }
}
