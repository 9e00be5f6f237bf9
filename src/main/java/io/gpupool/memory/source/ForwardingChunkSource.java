package io.gpupool.memory.source;

import io.gpupool.memory.ChunkSource;
import io.gpupool.memory.VirtualMemory;

import java.util.Objects;
import java.util.Optional;

/**
 * A {@link ChunkSource} that passes every call to an upstream source: the base of the decorators,
 * each of which overrides only the calls its concern touches. A decorator whose concern covers
 * mapped memory too overrides {@link #decorate} and wraps the upstream's {@link VirtualMemory} in a
 * {@link ForwardingVirtualMemory}; a source without virtual memory stays without it.
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
    public final Optional<VirtualMemory> virtualMemory() {
        return upstream.virtualMemory().map(this::decorate);
    }

    /** The virtual memory this source offers over the upstream's; the default passes it on unchanged. */
    protected VirtualMemory decorate(VirtualMemory upstreamMemory) {
        return upstreamMemory;
    }
}
