package io.gpupool.memory.trace;

import io.gpupool.memory.AllocationStream;
import io.gpupool.memory.metric.AllocatorMode;
import io.gpupool.memory.DeviceAllocator;
import io.gpupool.memory.DeviceBlock;
import io.gpupool.memory.metric.AllocatorMetrics;

import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Records the allocations and frees made through any {@link DeviceAllocator} as an RMM-format
 * trace (see {@link Trace}), switchable at runtime.
 *
 * <h2>How frees are seen</h2>
 * A {@link DeviceBlock} returns itself to the allocator that created it, so to see the free this
 * decorator hands out its own block (same address, sizes and stream) and keeps the inner block in
 * a map keyed by the outer block's identity:
 * <pre>
 *   caller --allocate--&gt; TracingAllocator --allocate--&gt; delegate
 *      outer block (owner = this)  &lt;-&gt;  inner block (owner = delegate)
 *   outer.release() reaches 0 -&gt; record "free" -&gt; inner.release() (releaseSettled: inner.releaseSettled())
 * </pre>
 * Only allocations made while recording are wrapped; when not recording, allocate passes the
 * delegate's block straight through (one volatile read of overhead). Consequently, frees of blocks
 * allocated before {@link #startRecording()} are not in the trace, and blocks allocated while
 * recording have their frees recorded only while recording is still on. The replayer tolerates both.
 * A refused allocation is recorded as {@code allocate failure} and the exception passes through.
 */
public final class TracingAllocator implements DeviceAllocator {

    private final DeviceAllocator delegate;
    private final TraceRecorder recorder;
    private final ConcurrentHashMap<DeviceBlock, DeviceBlock> innerByOuter = new ConcurrentHashMap<>();
    private final DeviceBlock.SettlingOwner owner = this::freeOuter;

    /** Wraps {@code delegate} with a buffer of at most {@code capacity} events; recording starts off. */
    public TracingAllocator(DeviceAllocator delegate, int capacity) {
        this(delegate, new TraceRecorder(capacity));
    }

    public TracingAllocator(DeviceAllocator delegate, TraceRecorder recorder) {
        this.delegate = Objects.requireNonNull(delegate, "delegate");
        this.recorder = Objects.requireNonNull(recorder, "recorder");
    }

    public void startRecording() {
        recorder.start();
    }

    public void stopRecording() {
        recorder.stop();
    }

    public boolean isRecording() {
        return recorder.isRecording();
    }

    public TraceRecorder recorder() {
        return recorder;
    }

    /** The events recorded so far; the buffer starts empty afterwards. */
    public Trace drain() {
        return recorder.drain();
    }

    @Override
    public DeviceBlock allocate(long bytes, AllocationStream stream) {
        return allocate(bytes, stream, false);
    }

    /** An arena goes to the delegate as an arena; the trace records it as an allocation like any other. */
    @Override
    public DeviceBlock allocateArena(long bytes, AllocationStream stream) {
        return allocate(bytes, stream, true);
    }

    private DeviceBlock allocate(long bytes, AllocationStream stream, boolean arena) {
        if (!recorder.isRecording()) {
            return arena ? delegate.allocateArena(bytes, stream) : delegate.allocate(bytes, stream);
        }
        int ordinal = stream == null ? Trace.NO_STREAM : stream.ordinal();
        DeviceBlock inner;
        try {
            inner = arena ? delegate.allocateArena(bytes, stream) : delegate.allocate(bytes, stream);
        } catch (RuntimeException e) {
            recorder.record(Trace.ALLOCATE_FAILURE, 0, bytes, ordinal);
            throw e;
        }
        DeviceBlock outer = new DeviceBlock(owner, inner.address(), inner.size(), inner.requestedBytes(),
                inner.stream(), inner.handle(), inner.allocationSite());
        innerByOuter.put(outer, inner);
        recorder.record(Trace.ALLOCATE, inner.address(), bytes, ordinal);
        return outer;
    }

    private void freeOuter(DeviceBlock outer, boolean settled) {
        DeviceBlock inner = innerByOuter.remove(outer);
        if (inner == null) {
            throw new IllegalStateException("free of a block this tracing allocator does not know: " + outer);
        }
        AllocationStream stream = outer.stream();
        recorder.record(Trace.FREE, outer.address(), outer.requestedBytes(),
                stream == null ? Trace.NO_STREAM : stream.ordinal());
        if (settled) {
            inner.releaseSettled();
        } else {
            inner.release();
        }
    }

    @Override
    public AllocatorMode mode() {
        return delegate.mode();
    }

    /** The wrapped allocator's metrics (tracing adds none of its own). */
    @Override
    public AllocatorMetrics metrics() {
        return delegate.metrics();
    }

    public DeviceAllocator delegate() {
        return delegate;
    }

    /** This recorder, or what the wrapped allocator offers. */
    @Override
    public <T> Optional<T> capability(Class<T> type) {
        Optional<T> own = DeviceAllocator.super.capability(type);
        return own.isPresent() ? own : delegate.capability(type);
    }

    @Override
    public void close() {
        recorder.stop();
        delegate.close();
    }
}
