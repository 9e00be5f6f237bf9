package io.gpupool.lab;

import io.gpupool.memory.DeviceAllocator;
import io.gpupool.memory.DeviceBlock;
import io.gpupool.replay.ReplayStream;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Threads;
import org.openjdk.jmh.annotations.Warmup;

import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Aggregate allocate + release throughput with 1, 4, 8 and 16 threads, each thread its own stream
 * (as the server leases one stream per request). Sizes are drawn per thread from a fixed mix of
 * small objects and blocks (256 B .. 8 MiB, log-uniform), so both levels and both caches are used.
 *
 * <p>{@link BenchAllocators#LIVE_BYTES} stay allocated in the background (on stream 0) so that the
 * pool's local caps are those of a server holding its tensors.
 *
 * <p>Compare the score (pairs per microsecond, all threads together) across thread counts: a
 * single-lock allocator ({@code best-fit}) stays flat or falls; the two-level pool should rise.
 * On a machine with fewer cores than threads the rise is capped by the cores.
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.Throughput)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Fork(value = 1, jvmArgsAppend = {"-Xms1g", "-Xmx1g"})
@Warmup(iterations = 2, time = 1)
@Measurement(iterations = 3, time = 1)
public class ThroughputBench {

    @Param({"two-level", "global-only", "best-fit"})
    public String allocator;

    private DeviceAllocator pool;
    private java.util.List<DeviceBlock> live;
    private final AtomicInteger nextOrdinal = new AtomicInteger();

    @Setup(Level.Trial)
    public void setUp() {
        pool = BenchAllocators.create(allocator);
        live = BenchAllocators.holdLive(pool, new ReplayStream(0));
    }

    @TearDown(Level.Trial)
    public void tearDown() {
        BenchAllocators.release(live);
        pool.close();
    }

    /** Per-thread stream and a precomputed ring of request sizes (no random numbers on the measured path). */
    @State(Scope.Thread)
    public static class PerThread {
        ReplayStream stream;
        final long[] sizes = new long[1024];
        int next;

        @Setup(Level.Trial)
        public void setUp(ThroughputBench bench) {
            int ordinal = bench.nextOrdinal.getAndIncrement();
            stream = new ReplayStream(ordinal);
            SplittableRandom random = new SplittableRandom(ordinal);
            for (int i = 0; i < sizes.length; i++) {
                sizes[i] = Math.max(1, (long) Math.pow(2, 8 + random.nextDouble() * 15)); // 256 B .. 8 MiB
            }
        }

        long nextSize() {
            long size = sizes[next];
            next = (next + 1) & (sizes.length - 1);
            return size;
        }
    }

    private long pair(PerThread t) {
        DeviceBlock block = pool.allocate(t.nextSize(), t.stream);
        long address = block.address();
        block.release();
        return address;
    }

    @Benchmark
    @Threads(1)
    public long threads01(PerThread t) {
        return pair(t);
    }

    @Benchmark
    @Threads(4)
    public long threads04(PerThread t) {
        return pair(t);
    }

    @Benchmark
    @Threads(8)
    public long threads08(PerThread t) {
        return pair(t);
    }

    @Benchmark
    @Threads(16)
    public long threads16(PerThread t) {
        return pair(t);
    }
}
