package io.gpupool.actuate;

import java.io.IOException;
import java.io.Writer;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.atomic.AtomicLong;

import io.gpupool.memory.AllocatorMode;
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
        return new Metrics();
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
        return DevicePoolAdapter.layout(new Metrics());
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
        public void writeCsv(Writer out) throws IOException {
            out.write("Thread,Time,Action,Pointer,Size,Stream\n");
            for (String line : lines) {
                out.write(line);
                out.write('\n');
            }
        }
    }

    /** Numbers consistent with one 256 MiB chunk: 100 MiB allocated, 16 MiB cached, 76 MiB free in 4 + 8 + 64 MiB blocks. */
    final class Metrics implements PoolMetrics, BlockLayoutMetric {

        @Override
        public String name() {
            return device;
        }

        @Override
        public AllocatorMode mode() {
            return config.mode();
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
            return allocated.get() - MIB;
        }

        @Override
        public long peakReservedBytes() {
            return 512 * MIB;
        }

        @Override
        public long peakAllocatedBytes() {
            return 200 * MIB;
        }

        @Override
        public long peakRequestedBytes() {
            return 180 * MIB;
        }

        @Override
        public void resetPeaks() {
        }

        @Override
        public AllocatorCounters counters() {
            return new AllocatorCounters(1000, 990, 800, 150, 3, trims.get(), 12, 1, failures.get());
        }

        @Override
        public LatencyDistribution allocationLatency() {
            return latency;
        }

        @Override
        public long cachedBytes() {
            return 16 * MIB;
        }

        @Override
        public List<StreamCacheMetric> streams() {
            return List.of(new StreamCacheMetric(0, 12 * MIB, 5, 600, 100),
                    new StreamCacheMetric(1, 4 * MIB, 2, 200, 100));
        }

        @Override
        public List<FreeOrderMetric> freeBlocks() {
            return List.of(new FreeOrderMetric(0, 2 * MIB, 0), new FreeOrderMetric(1, 4 * MIB, 1),
                    new FreeOrderMetric(2, 8 * MIB, 1), new FreeOrderMetric(3, 16 * MIB, 0),
                    new FreeOrderMetric(4, 32 * MIB, 0), new FreeOrderMetric(5, 64 * MIB, 1),
                    new FreeOrderMetric(6, 128 * MIB, 0), new FreeOrderMetric(7, 256 * MIB, 0));
        }

        @Override
        public long globalFreeBytes() {
            return 76 * MIB;
        }

        @Override
        public long largestFreeBlockBytes() {
            return 64 * MIB;
        }

        @Override
        public long mapCalls() {
            return 4;
        }

        @Override
        public long localCacheCapBytes() {
            return 32 * MIB;
        }

        @Override
        public long mapNanos() {
            return 3_000_000;
        }

        @Override
        public List<SizeClassMetric> smallClasses() {
            return List.of(new SizeClassMetric(0, 256, 2 * MIB, 1, 1000, 7192));
        }

        @Override
        public List<ChunkMetric> chunks() {
            return List.of(new ChunkMetric(0x7f0000000000L, 256 * MIB, 76 * MIB, false));
        }

        @Override
        public List<ChunkBlocks> layout() {
            List<Block> blocks = List.of(
                    new Block(0, 64 * MIB, BlockState.ALLOCATED),
                    new Block(64 * MIB, 32 * MIB, BlockState.ALLOCATED),
                    new Block(96 * MIB, 2 * MIB, BlockState.SPLIT),
                    new Block(98 * MIB, 2 * MIB, BlockState.ALLOCATED),
                    new Block(100 * MIB, 4 * MIB, BlockState.FREE),
                    new Block(104 * MIB, 8 * MIB, BlockState.FREE),
                    new Block(112 * MIB, 16 * MIB, BlockState.CACHED),
                    new Block(128 * MIB, 64 * MIB, BlockState.FREE),
                    new Block(192 * MIB, 64 * MIB, BlockState.ALLOCATED));
            return List.of(new ChunkBlocks(0x7f0000000000L, 256 * MIB, false, blocks));
        }
    }
}
