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
import org.openjdk.jmh.annotations.Warmup;

import java.util.concurrent.TimeUnit;

/**
 * Single-thread cost of one allocate + release pair, per strategy and size:
 * <ul>
 *   <li>{@code two-level}, 4 MiB: the stream-local cache hit (the block comes back to the same stream);</li>
 *   <li>{@code global-only}, 4 MiB: the global buddy level, split on allocate and merge on free;</li>
 *   <li>{@code two-level}, 1 KiB: the small-object cache;</li>
 *   <li>{@code best-fit}: the single-lock best-fit free list, both sizes.</li>
 * </ul>
 * One block of each size is kept live around the measured pair so that a free never empties the
 * allocator (which would measure chunk growth instead of reuse), and {@link BenchAllocators#LIVE_BYTES}
 * are kept live in the background for every allocator: the two-level pool caches a block locally only
 * when it is small against the live bytes, and before this background was added the "two-level 4 MiB"
 * pair was in fact a global-level pair.
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Fork(value = 1, jvmArgsAppend = {"-Xms1g", "-Xmx1g"})
@Warmup(iterations = 2, time = 1)
@Measurement(iterations = 3, time = 1)
public class PairBench {

    @Param({"two-level", "global-only", "best-fit"})
    public String allocator;

    @Param({"1024", "4194304"})
    public long bytes;

    private DeviceAllocator pool;
    private final ReplayStream stream = new ReplayStream(0);
    private DeviceBlock anchor;
    private java.util.List<DeviceBlock> live;

    @Setup(Level.Trial)
    public void setUp() {
        pool = BenchAllocators.create(allocator);
        live = BenchAllocators.holdLive(pool, stream);
        anchor = pool.allocate(bytes, stream);
        pool.allocate(bytes, stream).release(); // warm the path once
    }

    @TearDown(Level.Trial)
    public void tearDown() {
        anchor.release();
        BenchAllocators.release(live);
        pool.close();
    }

    @Benchmark
    public long pair() {
        return BenchAllocators.pair(pool, bytes, stream);
    }
}
