package io.gpupool.memory.metric;


import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;

/**
 * Ready-made {@link AllocatorMetrics} for allocators without levels (direct, cuda-async, best-fit):
 * the allocator calls the {@code on*} methods and readers use the getters.
 *
 * <p>Concurrency: event counts are {@link LongAdder}s; current byte totals are {@link AtomicLong}s
 * (needed to keep exact peaks), updated with one {@code addAndGet} each. No method blocks.
 */
public final class BasicAllocatorMetrics implements AllocatorMetrics {

    private final String name;
    private final AllocatorMode mode;
    private final AtomicLong reserved = new AtomicLong();
    private final AtomicLong allocated = new AtomicLong();
    private final AtomicLong requested = new AtomicLong();
    private final AtomicLong peakReserved = new AtomicLong();
    private final AtomicLong peakAllocated = new AtomicLong();
    private final AtomicLong peakRequested = new AtomicLong();
    private final LongAdder allocations = new LongAdder();
    private final LongAdder frees = new LongAdder();
    private final LongAdder grows = new LongAdder();
    private final LongAdder trims = new LongAdder();
    private final LongAdder failures = new LongAdder();
    private final Log2Histogram latency = new Log2Histogram();

    public BasicAllocatorMetrics(String name, AllocatorMode mode) {
        this.name = name;
        this.mode = mode;
    }

    /** A block of {@code roundedBytes} was handed out for a request of {@code requestedBytes}. */
    public void onAllocate(long requestedBytes, long roundedBytes, long latencyNanos) {
        allocations.increment();
        Peaks.raise(peakRequested, requested.addAndGet(requestedBytes));
        Peaks.raise(peakAllocated, allocated.addAndGet(roundedBytes));
        latency.record(latencyNanos);
    }

    /** A block handed out earlier came back. */
    public void onFree(long requestedBytes, long roundedBytes) {
        frees.increment();
        requested.addAndGet(-requestedBytes);
        allocated.addAndGet(-roundedBytes);
    }

    /** {@code bytes} were obtained from the device. */
    public void onReserve(long bytes) {
        grows.increment();
        Peaks.raise(peakReserved, reserved.addAndGet(bytes));
    }

    /** {@code bytes} were given back to the device. */
    public void onUnreserve(long bytes) {
        trims.increment();
        reserved.addAndGet(-bytes);
    }

    /** An allocation failed with an out-of-memory error. */
    public void onFailure() {
        failures.increment();
    }

    @Override
    public String name() {
        return name;
    }

    @Override
    public AllocatorMode mode() {
        return mode;
    }

    @Override
    public long reservedBytes() {
        return reserved.get();
    }

    @Override
    public long allocatedBytes() {
        return allocated.get();
    }

    @Override
    public long requestedBytes() {
        return requested.get();
    }

    @Override
    public long peakReservedBytes() {
        return peakReserved.get();
    }

    @Override
    public long peakAllocatedBytes() {
        return peakAllocated.get();
    }

    @Override
    public long peakRequestedBytes() {
        return peakRequested.get();
    }

    @Override
    public void resetPeaks() {
        peakReserved.set(reserved.get());
        peakAllocated.set(allocated.get());
        peakRequested.set(requested.get());
    }

    @Override
    public AllocatorCounters counters() {
        return new AllocatorCounters(allocations.sum(), frees.sum(), 0, 0, grows.sum(), trims.sum(), 0, 0,
                failures.sum());
    }

    @Override
    public LatencyDistribution allocationLatency() {
        return latency;
    }
}
