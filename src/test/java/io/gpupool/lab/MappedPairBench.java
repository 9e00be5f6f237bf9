package io.gpupool.lab;

import io.gpupool.memory.AllocationStream;
import io.gpupool.memory.PoolConfig;
import io.gpupool.memory.pool.DevicePool;
import io.gpupool.replay.SimulatedChunkSource;
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
 * AllocBench's single-stream pair on the host, as the H200 runs it: the default pool (TWO_LEVEL,
 * MAPPED growth) on a simulated device that maps, nothing else live, and fences that finish
 * {@code fenceLagNanos} after they are recorded (a real stream's event is not complete the moment
 * the free records it; 0 = complete at once, as {@link PairBench}'s replay streams). A 64 MiB block is
 * too large for the stream's cache here, so each pair goes through the global level: the block comes
 * back to the stream that freed it while its fence may still be pending, and the per-unit fence work
 * of its 32 minimum blocks is what the pair costs.
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Fork(value = 1, jvmArgsAppend = {"-Xms1g", "-Xmx1g"})
@Warmup(iterations = 2, time = 1)
@Measurement(iterations = 3, time = 1)
public class MappedPairBench {

    @Param({"2097152", "67108864"})
    public long bytes;

    @Param({"0", "20000"})
    public long fenceLagNanos;

    private DevicePool pool;
    private AllocationStream stream;

    @Setup(Level.Trial)
    public void setUp() {
        pool = new DevicePool(SimulatedChunkSource.withMapping("bench", BenchAllocators.DEVICE_BYTES), PoolConfig.defaults());
        stream = new LaggingStream(0, fenceLagNanos);
        pool.allocate(bytes, stream).release();                   // map once, as AllocBench's warm-up does
    }

    @TearDown(Level.Trial)
    public void tearDown() {
        pool.close();
    }

    @Benchmark
    public long pair() {
        return BenchAllocators.pair(pool, bytes, stream);
    }
}
