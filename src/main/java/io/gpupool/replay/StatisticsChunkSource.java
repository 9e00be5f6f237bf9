package io.gpupool.replay;

import io.gpupool.memory.source.ForwardingChunkSource;
import io.gpupool.memory.source.ForwardingVirtualMemory;

import io.gpupool.memory.ChunkSource;
import io.gpupool.memory.VirtualMemory;
import io.gpupool.memory.metric.LatencyDistribution;
import io.gpupool.memory.metric.Log2Histogram;
import io.gpupool.memory.metric.Peaks;

import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.LongSupplier;

/**
 * Counts what passes through an upstream {@link ChunkSource}: chunks and bytes reserved now and at
 * peak, allocate / free / failure counts, and the time spent in the upstream's allocate and free.
 *
 * <p>Counters that only grow are {@link LongAdder}s (many writers, rare readers). The current and
 * peak reservation are {@link AtomicLong}s: the peak is raised with a compare-and-set loop, so it
 * never misses a maximum. Reading any of them takes no lock. A failed upstream allocation changes
 * only {@link #failures()} (and its latency): the reservation is counted after the upstream
 * succeeded, so there is nothing to roll back.
 */
public final class StatisticsChunkSource extends ForwardingChunkSource {

    private final AtomicLong reservedBytes = new AtomicLong();
    private final AtomicLong peakReservedBytes = new AtomicLong();
    private final AtomicLong reservedChunks = new AtomicLong();
    private final LongAdder allocations = new LongAdder();
    private final LongAdder frees = new LongAdder();
    private final LongAdder maps = new LongAdder();
    private final LongAdder mappedBytes = new LongAdder();
    private final LongAdder mappedExtents = new LongAdder();
    private final LongAdder unmaps = new LongAdder();
    private final LongAdder releases = new LongAdder();
    /** Sizes of the physical allocations alive now, to take them off the reserved bytes at release. */
    private final java.util.concurrent.ConcurrentHashMap<Long, Long> physicalSizes = new java.util.concurrent.ConcurrentHashMap<>();
    private final LongAdder failures = new LongAdder();
    private final LongAdder allocateNanos = new LongAdder();
    private final LongAdder freeNanos = new LongAdder();
    private final AtomicLong maxAllocateNanos = new AtomicLong();
    private final Log2Histogram allocateLatency = new Log2Histogram();

    public StatisticsChunkSource(ChunkSource upstream) {
        super(upstream);
    }

    @Override
    public long allocate(long bytes) {
        long address = timedAllocation(() -> upstream.allocate(bytes));
        allocations.increment();
        reservedChunks.incrementAndGet();
        Peaks.raise(peakReservedBytes, reservedBytes.addAndGet(bytes));
        return address;
    }

    @Override
    public void free(long address, long bytes) {
        timedFree(() -> upstream.free(address, bytes));
        frees.increment();
        reservedChunks.decrementAndGet();
        reservedBytes.addAndGet(-bytes);
    }

    /** Maps count as reserved memory and as allocation time; unmaps as frees. */
    @Override
    protected VirtualMemory decorate(VirtualMemory upstreamMemory) {
        return new ForwardingVirtualMemory(upstreamMemory) {
            @Override
            public void map(long address, long bytes, long extentBytes) {
                timedAllocation(() -> {
                    upstream.map(address, bytes, extentBytes);
                    return 0;
                });
                maps.increment();
                mappedBytes.add(bytes);
                mappedExtents.add(bytes / extentBytes);
                Peaks.raise(peakReservedBytes, reservedBytes.addAndGet(bytes));
            }

            @Override
            public void unmap(long address, long bytes) {
                timedFree(() -> upstream.unmap(address, bytes));
                unmaps.increment();
                reservedBytes.addAndGet(-bytes);
            }

            @Override
            public long createPhysical(long bytes) {
                long handle = timedAllocation(() -> upstream.createPhysical(bytes));
                mappedExtents.increment();
                physicalSizes.put(handle, bytes);
                Peaks.raise(peakReservedBytes, reservedBytes.addAndGet(bytes));
                return handle;
            }

            @Override
            public void releasePhysical(long handle) {
                timedFree(() -> upstream.releasePhysical(handle));
                releases.increment();
                Long bytes = physicalSizes.remove(handle);
                reservedBytes.addAndGet(bytes == null ? 0 : -bytes);
            }

            @Override
            public void mapPhysical(long address, long extentBytes, long[] handles, int count) {
                timedAllocation(() -> {
                    upstream.mapPhysical(address, extentBytes, handles, count);
                    return 0;
                });
                maps.increment();
                mappedBytes.add(count * extentBytes);
            }

            @Override
            public void unmapPhysical(long address, long extentBytes, long[] handles, int count) {
                timedFree(() -> upstream.unmapPhysical(address, extentBytes, handles, count));
                unmaps.increment();
            }
        };
    }

    /** Calls of {@link #map} that succeeded. */
    public long maps() {
        return maps.sum();
    }

    /** Bytes mapped by all {@link #map} calls together (traffic, not what is mapped now). */
    public long mappedBytesTotal() {
        return mappedBytes.sum();
    }

    /** Physical allocations made by all {@link #map} calls (extents, or granules without an extent) and by createPhysical. */
    public long mappedExtentsTotal() {
        return mappedExtents.sum();
    }

    /** Physical allocations released (cuMemRelease), each one the pool did not keep for reuse. */
    public long physicalReleases() {
        return releases.sum();
    }

    /** Calls of {@link #unmap}. */
    public long unmaps() {
        return unmaps.sum();
    }

    /** Bytes in chunks currently reserved from the upstream. */
    public long reservedBytes() {
        return reservedBytes.get();
    }

    /** The highest {@link #reservedBytes()} since creation or the last {@link #resetPeak()}. */
    public long peakReservedBytes() {
        return peakReservedBytes.get();
    }

    /** Starts a new peak window at the current reservation. */
    public void resetPeak() {
        peakReservedBytes.set(reservedBytes.get());
    }

    public long reservedChunks() {
        return reservedChunks.get();
    }

    /** Successful upstream allocations. */
    public long allocations() {
        return allocations.sum();
    }

    public long frees() {
        return frees.sum();
    }

    /** Upstream allocations that threw. */
    public long failures() {
        return failures.sum();
    }

    /** Total time spent in upstream allocate calls (successful or not), in nanoseconds. */
    public long allocateNanos() {
        return allocateNanos.sum();
    }

    /** Longest single upstream allocate call, in nanoseconds. */
    public long maxAllocateNanos() {
        return maxAllocateNanos.get();
    }

    /** Distribution of upstream allocate times (successful or not), in power-of-two buckets. */
    public LatencyDistribution allocateLatency() {
        return allocateLatency;
    }

    /** Total time spent in upstream free calls, in nanoseconds. */
    public long freeNanos() {
        return freeNanos.sum();
    }

    /** Runs a call that takes memory from the upstream: its time is allocation time, its failure a failure. */
    private long timedAllocation(LongSupplier call) {
        long start = System.nanoTime();
        try {
            return call.getAsLong();
        } catch (Throwable e) {
            failures.increment();
            throw e;
        } finally {
            recordAllocateTime(System.nanoTime() - start);
        }
    }

    /** Runs a call that gives memory back to the upstream; its time, when it returns, is free time. */
    private void timedFree(Runnable call) {
        long start = System.nanoTime();
        call.run();
        freeNanos.add(System.nanoTime() - start);
    }

    private void recordAllocateTime(long nanos) {
        allocateNanos.add(nanos);
        allocateLatency.record(nanos);
        Peaks.raise(maxAllocateNanos, nanos);
    }

    @Override
    public String toString() {
        return "StatisticsChunkSource[" + name() + ", reserved=" + reservedBytes.get() + " in "
                + reservedChunks.get() + " chunks, peak=" + peakReservedBytes.get() + ", allocations="
                + allocations.sum() + ", frees=" + frees.sum() + ", failures=" + failures.sum() + "]";
    }
}
