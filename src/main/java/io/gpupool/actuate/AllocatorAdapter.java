package io.gpupool.actuate;

import java.util.List;
import java.util.Objects;
import java.util.function.LongSupplier;

import io.gpupool.memory.metric.AllocatorMode;
import io.gpupool.memory.PoolConfig;
import io.gpupool.memory.PoolTuning;
import io.gpupool.memory.metric.AllocatorCounters;
import io.gpupool.memory.metric.AllocatorMetrics;
import io.gpupool.memory.metric.ChunkMetric;
import io.gpupool.memory.metric.FreeOrderMetric;
import io.gpupool.memory.metric.LatencyDistribution;
import io.gpupool.memory.metric.PoolMetrics;
import io.gpupool.memory.metric.SizeClassMetric;
import io.gpupool.memory.metric.StreamCacheMetric;
import org.jspecify.annotations.Nullable;

/**
 * {@link ManagedPool} over an allocator that is not a {@code memory.DevicePool}: the best-fit baseline
 * and the per-request baselines (direct, cuda-async), so that the {@code gpupool} endpoint, the meters
 * and the pool health show every mode's memory side by side with the pool's.
 *
 * <p>These allocators have no levels, so the view ({@link Metrics}) carries what every allocator
 * measures ({@link AllocatorMetrics}: reserved, allocated, requested, their peaks, the counters and the
 * allocation latency) and leaves the rest empty: no local caches, no buddy free lists, no size classes,
 * no chunks. Free bytes and the largest free block come from the allocator where it knows them (the
 * free segments inside best-fit's chunks), else they are 0 and so is the fragmentation. What
 * "reserved" counts is the allocator's to say: the outstanding blocks for direct, the chunks held for
 * best-fit, the driver's memory pool (which keeps what it freed) for cuda-async.
 *
 * <p>Operations: {@link #tune} refuses (no pool configuration: {@link TuningException#noPool}),
 * {@link #trim} gives back what the allocator's own trim gives (best-fit's wholly free chunks) or 0,
 * {@link #layout} is empty, and trace recording works as for a pool.
 */
public final class AllocatorAdapter extends DeviceAdapter {

    private final Metrics metrics;
    private final LongSupplier trim;

    /**
     * @param device        the selector, e.g. {@code cuda:0}
     * @param metrics       the allocator's view, see {@link Metrics}
     * @param capacityBytes memory of the device
     * @param trace         trace recording of the allocator, or null
     * @param trim          the allocator's trim, answering the bytes it gave back ({@code () -> 0} for none)
     */
    public AllocatorAdapter(String device, Metrics metrics, long capacityBytes, @Nullable TraceControl trace,
                            LongSupplier trim) {
        super(device, capacityBytes, trace);
        this.metrics = Objects.requireNonNull(metrics, "metrics");
        this.trim = Objects.requireNonNull(trim, "trim");
    }

    /** Over an allocator that keeps nothing free (direct, cuda-async): nothing to trim, free bytes 0. */
    public static AllocatorAdapter of(String device, AllocatorMetrics allocator, long capacityBytes,
                                      @Nullable TraceControl trace) {
        return new AllocatorAdapter(device, new Metrics(allocator, () -> 0, () -> 0), capacityBytes, trace, () -> 0);
    }

    @Override
    public PoolMetrics metrics() {
        return metrics;
    }

    /** Always null: these allocators have no pool configuration. */
    @Override
    public @Nullable PoolConfig configuration() {
        return null;
    }

    /** @throws TuningException always, naming the mode and the modes that can be tuned */
    @Override
    public PoolConfig tune(PoolTuning tuning) {
        throw TuningException.noPool(metrics.mode());
    }

    @Override
    public long trim() {
        return trim.getAsLong();
    }

    @Override
    public List<ChunkLayout> layout() {
        return List.of();
    }

    /**
     * {@link PoolMetrics} over an allocator's {@link AllocatorMetrics}: the common numbers are read from
     * it at each call (never copied), the pool-only lists are empty. Reads take no lock as long as the
     * allocator's getters and the two suppliers take none.
     *
     * @param allocator        the allocator's metrics
     * @param freeBytes        free bytes the allocator holds inside reserved memory (0 if it holds none)
     * @param largestFreeBytes the largest of those free ranges
     */
    public record Metrics(AllocatorMetrics allocator, LongSupplier freeBytes, LongSupplier largestFreeBytes)
            implements PoolMetrics {

        public Metrics {
            Objects.requireNonNull(allocator, "allocator");
            Objects.requireNonNull(freeBytes, "freeBytes");
            Objects.requireNonNull(largestFreeBytes, "largestFreeBytes");
        }

        @Override
        public String name() {
            return allocator.name();
        }

        @Override
        public AllocatorMode mode() {
            return allocator.mode();
        }

        @Override
        public long reservedBytes() {
            return allocator.reservedBytes();
        }

        @Override
        public long allocatedBytes() {
            return allocator.allocatedBytes();
        }

        @Override
        public long requestedBytes() {
            return allocator.requestedBytes();
        }

        @Override
        public long peakReservedBytes() {
            return allocator.peakReservedBytes();
        }

        @Override
        public long peakAllocatedBytes() {
            return allocator.peakAllocatedBytes();
        }

        @Override
        public long peakRequestedBytes() {
            return allocator.peakRequestedBytes();
        }

        @Override
        public void resetPeaks() {
            allocator.resetPeaks();
        }

        @Override
        public AllocatorCounters counters() {
            return allocator.counters();
        }

        @Override
        public LatencyDistribution allocationLatency() {
            return allocator.allocationLatency();
        }

        /** No local caches. */
        @Override
        public long cachedBytes() {
            return 0;
        }

        @Override
        public List<StreamCacheMetric> streams() {
            return List.of();
        }

        @Override
        public List<FreeOrderMetric> freeBlocks() {
            return List.of();
        }

        @Override
        public long globalFreeBytes() {
            return freeBytes.getAsLong();
        }

        @Override
        public long largestFreeBlockBytes() {
            return largestFreeBytes.getAsLong();
        }

        @Override
        public List<SizeClassMetric> smallClasses() {
            return List.of();
        }

        @Override
        public List<ChunkMetric> chunks() {
            return List.of();
        }
    }
}
