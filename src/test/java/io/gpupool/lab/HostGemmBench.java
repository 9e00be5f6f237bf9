package io.gpupool.lab;

import io.gpupool.kernels.TensorOps.Activation;
import io.gpupool.kernels.host.HostTensorOps;
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

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Random;
import java.util.concurrent.TimeUnit;

/**
 * The host GEMM ({@link HostTensorOps#gemm}) at BERT-base linear shapes: 128 tokens × 768 → 768
 * (attention output), 768 → 3072 (intermediate, GELU), 3072 → 768 (output). GFLOP/s = 2·rows·in·out /
 * (time per op). Run with {@code tools/bench.sh HostGemmBench}.
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MILLISECONDS)
@Fork(value = 1, jvmArgsAppend = {"-Xms1g", "-Xmx1g", "--enable-native-access=ALL-UNNAMED"})
@Warmup(iterations = 2, time = 1)
@Measurement(iterations = 3, time = 1)
public class HostGemmBench {

    @Param({"128x768x768", "128x768x3072", "128x3072x768"})
    public String shape;

    private Arena arena;
    private MemorySegment x;
    private MemorySegment w;
    private MemorySegment b;
    private MemorySegment y;
    private int rows;
    private int in;
    private int out;

    @Setup(Level.Trial)
    public void setUp() {
        String[] parts = shape.split("x");
        rows = Integer.parseInt(parts[0]);
        in = Integer.parseInt(parts[1]);
        out = Integer.parseInt(parts[2]);
        arena = Arena.ofShared();
        Random random = new Random(1);
        x = fill(arena.allocate((long) rows * in * 4, 256), random);
        w = fill(arena.allocate((long) out * in * 4, 256), random);
        b = fill(arena.allocate((long) out * 4, 256), random);
        y = arena.allocate((long) rows * out * 4, 256);
    }

    private static MemorySegment fill(MemorySegment segment, Random random) {
        for (long i = 0; i < segment.byteSize() / 4; i++) {
            segment.setAtIndex(ValueLayout.JAVA_FLOAT, i, (float) random.nextGaussian());
        }
        return segment;
    }

    @TearDown(Level.Trial)
    public void tearDown() {
        arena.close();
    }

    @Benchmark
    public MemorySegment linear() {
        HostTensorOps.gemm(x, w, b, y, rows, in, out, Activation.NONE);
        return y;
    }
}
