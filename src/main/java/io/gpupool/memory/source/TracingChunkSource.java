package io.gpupool.memory.source;

import io.gpupool.memory.ChunkSource;
import io.gpupool.memory.trace.Trace;
import io.gpupool.memory.trace.TraceRecorder;

import java.util.Objects;

/**
 * Records the chunk traffic of an upstream {@link ChunkSource} into a {@link TraceRecorder}, in the
 * same CSV format as allocation traces (Stream column {@code none}: chunks belong to no stream).
 *
 * <p>A successful allocate is recorded after the upstream returned its address; a refused one is
 * recorded as {@code allocate failure} with pointer 0 and the exception passes through. A free is
 * recorded before the upstream takes the chunk back, so the same address can never appear as
 * allocated again before its free in the trace. When the recorder is stopped the cost is one
 * volatile read per call.
 */
public final class TracingChunkSource extends ForwardingChunkSource {

    private final TraceRecorder recorder;

    public TracingChunkSource(ChunkSource upstream, TraceRecorder recorder) {
        super(upstream);
        this.recorder = Objects.requireNonNull(recorder, "recorder");
    }

    @Override
    public long allocate(long bytes) {
        long address;
        try {
            address = upstream.allocate(bytes);
        } catch (Throwable t) {
            recorder.record(Trace.ALLOCATE_FAILURE, 0, bytes, Trace.NO_STREAM);
            throw t;
        }
        recorder.record(Trace.ALLOCATE, address, bytes, Trace.NO_STREAM);
        return address;
    }

    @Override
    public void free(long address, long bytes) {
        recorder.record(Trace.FREE, address, bytes, Trace.NO_STREAM);
        upstream.free(address, bytes);
    }

    @Override
    public void map(long address, long bytes, long extentBytes) {
        try {
            upstream.map(address, bytes, extentBytes);
        } catch (Throwable t) {
            recorder.record(Trace.ALLOCATE_FAILURE, 0, bytes, Trace.NO_STREAM);
            throw t;
        }
        recorder.record(Trace.ALLOCATE, address, bytes, Trace.NO_STREAM);
    }

    @Override
    public void unmap(long address, long bytes) {
        recorder.record(Trace.FREE, address, bytes, Trace.NO_STREAM);
        upstream.unmap(address, bytes);
    }

    public TraceRecorder recorder() {
        return recorder;
    }
}
