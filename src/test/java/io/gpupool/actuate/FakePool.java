package io.gpupool.actuate;

import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.atomic.AtomicLong;

import io.gpupool.memory.metric.AllocatorMode;
import io.gpupool.memory.PoolConfig;
import io.gpupool.memory.PoolTuning;
import io.gpupool.memory.metric.AllocatorCounters;
import io.gpupool.memory.metric.BlockLayoutMetric;
import io.gpupool.memory.metric.ChunkMetric;
import io.gpupool.memory.metric.FreeOrderMetric;
import io.gpupool.memory.metric.LatencyDistribution;
import io.gpupool.memory.metric.Log2Histogram;
import io.gpupool.memory.metric.PoolMetrics;
import io.gpupool.memory.metric.SizeClassMetric;
import io.gpupool.memory.metric.StreamCacheMetric;

/**
 * A pool whose numbers the test sets: one 256 MiB chunk with a fixed block layout, two streams, a
 * real {@link PoolConfig} (so tuning is validated exactly as the pool validates it) and a trace
 * recorder that keeps lines in memory.
 */
final class FakePool implements ManagedPool {

    static final long MIB = 1L << 20;

    final String device;
    volatile PoolConfig config = PoolConfig.defaults();
    final AtomicLong reserved = new AtomicLong(256 * MIB);
    final AtomicLong allocated = new AtomicLong(100 * MIB);
    final AtomicLong failures = new AtomicLong();
    final AtomicLong trims = new AtomicLong();
    final Log2Histogram latency = new Log2Histogram();
    final FakeTrace trace;
    long trimReleases = 64 * MIB;

    FakePool(String device, boolean traced) {
        this.device = device;
        this.trace = traced ? new FakeTrace() : null;
        for (int i = 0; i < 90; i++) {
            latency.record(40);
        }
        for (int i = 0; i < 10; i++) {
            latency.record(3000);
        }
    }

    /** Back to the state after construction (tests share one context). */
    void reset() {
        config = PoolConfig.defaults();
        reserved.set(256 * MIB);
        allocated.set(100 * MIB);
        failures.set(0);
        trims.set(0);
        if (trace != null) {
            trace.recording = false;
            trace.lines.clear();
        }
    }

    @Override
    public String device() {
        return device;
    }

    @Override
    public long capacityBytes() {
        return 1024 * MIB;
    }

    @Override
    public PoolMetrics metrics() {
        return snapshot();
    }

    @Override
    public PoolConfig configuration() {
        return config;
    }

    @Override
    public PoolConfig tune(PoolTuning tuning) {
        config = config.apply(tuning);
        return config;
    }

    @Override
    public long trim() {
        trims.incrementAndGet();
        reserved.addAndGet(-trimReleases);
        return trimReleases;
    }

    @Override
    public List<ChunkLayout> layout() {
        return DevicePoolAdapter.layout(snapshot());
    }

    @Override
    public Optional<TraceControl> trace() {
        return Optional.ofNullable(trace);
    }

    static final class FakeTrace implements TraceControl {
        volatile boolean recording;
        final List<String> lines = new ArrayList<>();

        @Override
        public boolean recording() {
            return recording;
        }

        @Override
        public long events() {
            return lines.size();
        }

        @Override
        public void start() {
            lines.clear();
            recording = true;
            lines.add("7,00:00:01.000000,allocate,0x7f0000000000,4096,0");
            lines.add("7,00:00:01.000100,free,0x7f0000000000,4096,0");
        }

        @Override
        public void stop() {
            recording = false;
        }

        @Override
        public java.io.InputStream csv(boolean rawAddresses) {
            StringBuilder text = new StringBuilder("Thread,Time,Action,Pointer,Size,Stream\n");
            for (String line : lines) {
                text.append(rawAddresses ? line : line.replace("0x7f0000000000", "0x5eed")).append('\n');
            }
            return new java.io.ByteArrayInputStream(text.toString().getBytes(java.nio.charset.StandardCharsets.UTF_8));
        }
    }

    /** Numbers consistent with one 256 MiB chunk: 100 MiB allocated, 16 MiB cached, 76 MiB free in 4 + 8 + 64 MiB blocks. */
    private Snapshot snapshot() {
        List<BlockLayoutMetric.Block> blocks = List.of(
                new BlockLayoutMetric.Block(0, 64 * MIB, BlockLayoutMetric.BlockState.ALLOCATED),
                new BlockLayoutMetric.Block(64 * MIB, 32 * MIB, BlockLayoutMetric.BlockState.ALLOCATED),
                new BlockLayoutMetric.Block(96 * MIB, 2 * MIB, BlockLayoutMetric.BlockState.SPLIT),
                new BlockLayoutMetric.Block(98 * MIB, 2 * MIB, BlockLayoutMetric.BlockState.ALLOCATED),
                new BlockLayoutMetric.Block(100 * MIB, 4 * MIB, BlockLayoutMetric.BlockState.FREE),
                new BlockLayoutMetric.Block(104 * MIB, 8 * MIB, BlockLayoutMetric.BlockState.FREE),
                new BlockLayoutMetric.Block(112 * MIB, 16 * MIB, BlockLayoutMetric.BlockState.CACHED),
                new BlockLayoutMetric.Block(128 * MIB, 64 * MIB, BlockLayoutMetric.BlockState.FREE),
                new BlockLayoutMetric.Block(192 * MIB, 64 * MIB, BlockLayoutMetric.BlockState.ALLOCATED));
        return new Snapshot(device, config.mode(), reserved.get(), allocated.get(), allocated.get() - MIB,
                512 * MIB, 200 * MIB, new AllocatorCounters(1000, 990, 800, 150, 3, trims.get(), 12, 1, failures.get()),
                latency, 16 * MIB,
                List.of(new StreamCacheMetric(0, 12 * MIB, 5, 600, 100), new StreamCacheMetric(1, 4 * MIB, 2, 200, 100)),
                List.of(new FreeOrderMetric(0, 2 * MIB, 0), new FreeOrderMetric(1, 4 * MIB, 1),
                        new FreeOrderMetric(2, 8 * MIB, 1), new FreeOrderMetric(3, 16 * MIB, 0),
                        new FreeOrderMetric(4, 32 * MIB, 0), new FreeOrderMetric(5, 64 * MIB, 1),
                        new FreeOrderMetric(6, 128 * MIB, 0), new FreeOrderMetric(7, 256 * MIB, 0)),
                76 * MIB, 64 * MIB, 4, 32 * MIB, 3_000_000,
                List.of(new SizeClassMetric(0, 256, 2 * MIB, 1, 1000, 7192)),
                List.of(new ChunkMetric(0x7f0000000000L, 256 * MIB, 76 * MIB, false)),
                List.of(new BlockLayoutMetric.ChunkBlocks(0x7f0000000000L, 256 * MIB, false, blocks)));
    }

    /**
     * The pool's numbers as the test set them: each component is the {@link PoolMetrics} (or
     * {@link BlockLayoutMetric}) method of the same name, so the record implements them without a getter
     * of its own.
     */
    record Snapshot(String name, AllocatorMode mode, long reservedBytes, long allocatedBytes, long requestedBytes,
                    long peakReservedBytes, long peakAllocatedBytes, AllocatorCounters counters,
                    LatencyDistribution allocationLatency, long cachedBytes, List<StreamCacheMetric> streams,
                    List<FreeOrderMetric> freeBlocks, long globalFreeBytes, long largestFreeBlockBytes, long mapCalls,
                    long localCacheCapBytes, long mapNanos, List<SizeClassMetric> smallClasses,
                    List<ChunkMetric> chunks, List<BlockLayoutMetric.ChunkBlocks> layout)
            implements PoolMetrics, BlockLayoutMetric {

        @Override
        public long peakRequestedBytes() {
            return 180 * MIB;
        }

        @Override
        public void resetPeaks() {
        }

        @Override
        public long retainedHandles() {
            return 3;
        }

        @Override
        public long retainedHandleBytes() {
            return 6 * MIB;
        }

        @Override
        public long physicalCreates() {
            return 40;
        }

        @Override
        public long physicalReleases() {
            return 25;
        }
    }
}
