package io.gpupool.lab;

import io.gpupool.memory.DeviceAllocator;
import io.gpupool.memory.PoolConfig;
import io.gpupool.memory.metric.AllocatorMode;
import io.gpupool.memory.pool.DevicePool;
import io.gpupool.replay.SimulatedChunkSource;

import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;

/**
 * AllocBench's single-stream pair on the host, timed in the thread's CPU time: on a shared machine a
 * wall-clock benchmark measures the neighbours (at a load average of 8 on 2 cores JMH's intervals on
 * these pairs were ±100 % and more), while the CPU time a pair costs stays what the code does.
 *
 * <p>The default pool (MAPPED growth on a simulated device that maps, nothing else live) in TWO_LEVEL
 * and GLOBAL_ONLY mode, one stream whose fences complete at once or {@code --lag} ns after they were
 * recorded (a GPU's event is not complete the moment the free records it). Per mode and size: one
 * warm-up round, then {@code --rounds} rounds of {@code --round-ms}; best and median CPU nanoseconds
 * per pair, and the fences recorded and completion queries made per pair (on a GPU each is a driver
 * call). Each mode runs in a pool of its own; run the modes in separate JVMs ({@code --modes}) when
 * comparing builds, since a mode measured after another runs on code compiled for both. {@code --lazy-fences true}
 * turns on the pool's lazy fences (a free into the global level records a fence only when another stream needs
 * it; this single stream never does, so its fences per pair drop to 0).
 *
 * <pre>
 *   java -cp target/test-classes:target/classes:$(cat target/cp.txt) io.gpupool.lab.PairCpuBench \
 *        [--modes two-level,global-only] [--sizes 512,65536,2097152,67108864] [--lag 0] [--lazy-fences false] [--rounds 9]
 *        [--round-ms 100] [--json out.json]
 * </pre>
 */
public final class PairCpuBench {

    private static long sink;

    private PairCpuBench() {
    }

    public static void main(String[] args) throws Exception {
        List<String> modes = List.of("two-level", "global-only");
        long[] sizes = {512, 64L << 10, 2L << 20, 64L << 20};
        long lag = 0;
        boolean lazyFences = false;
        int rounds = 9;
        long roundMillis = 100;
        Path json = null;
        for (int i = 0; i < args.length; i += 2) {
            String value = args[i + 1];
            switch (args[i]) {
                case "--modes" -> modes = List.of(value.split(","));
                case "--sizes" -> sizes = Arrays.stream(value.split(",")).mapToLong(Long::parseLong).toArray();
                case "--lag" -> lag = Long.parseLong(value);
                case "--lazy-fences" -> lazyFences = Boolean.parseBoolean(value);
                case "--rounds" -> rounds = Integer.parseInt(value);
                case "--round-ms" -> roundMillis = Long.parseLong(value);
                case "--json" -> json = Path.of(value);
                default -> throw new IllegalArgumentException("unknown option " + args[i]);
            }
        }
        ThreadMXBean threads = ManagementFactory.getThreadMXBean();
        List<String> rows = new ArrayList<>();
        for (String mode : modes) {
            AllocatorMode allocatorMode = switch (mode) {
                case "two-level" -> AllocatorMode.TWO_LEVEL;
                case "global-only" -> AllocatorMode.GLOBAL_ONLY;
                default -> throw new IllegalArgumentException("unknown mode " + mode);
            };
            try (DeviceAllocator pool = new DevicePool(SimulatedChunkSource.withMapping("bench", BenchAllocators.DEVICE_BYTES),
                    PoolConfig.defaults().withMode(allocatorMode).withLazyFences(lazyFences))) {
                LaggingStream stream = new LaggingStream(0, lag);
                for (long size : sizes) {
                    double[] cpu = new double[rounds];
                    long pairs = 0;
                    long recordedBefore = stream.recorded;
                    long queriedBefore = stream.queried;
                    for (int r = -1; r < rounds; r++) {            // round -1: warm-up, not measured
                        long deadline = System.nanoTime() + roundMillis * 1_000_000;
                        long start = threads.getCurrentThreadCpuTime();
                        long n = 0;
                        do {
                            for (int i = 0; i < 64; i++) {
                                sink += BenchAllocators.pair(pool, size, stream);
                            }
                            n += 64;
                        } while (System.nanoTime() < deadline);
                        if (r >= 0) {
                            cpu[r] = (double) (threads.getCurrentThreadCpuTime() - start) / n;
                        }
                        pairs += n;
                    }
                    Arrays.sort(cpu);
                    double fences = (double) (stream.recorded - recordedBefore) / pairs;
                    double queries = (double) (stream.queried - queriedBefore) / pairs;
                    System.out.printf(Locale.ROOT, "%-12s %10d B  lag %6d ns  lazy %-5s  cpu best %7.1f  median %7.1f ns/pair"
                            + "  fences %.2f  queries %.2f per pair%n", mode, size, lag, lazyFences, cpu[0], cpu[rounds / 2], fences, queries);
                    rows.add(String.format(Locale.ROOT, "    {\"mode\": \"%s\", \"bytes\": %d, \"lagNanos\": %d, \"lazyFences\": %b,"
                                    + " \"bestCpuNanos\": %.1f, \"medianCpuNanos\": %.1f, \"fencesPerPair\": %.3f,"
                                    + " \"queriesPerPair\": %.3f}", mode, size, lag, lazyFences, cpu[0], cpu[rounds / 2], fences, queries));
                }
            }
        }
        if (json != null) {
            Files.writeString(json, "{\n  \"rows\": [\n" + String.join(",\n", rows) + "\n  ],\n  \"sink\": " + (sink & 1) + "\n}\n");
        }
    }
}
