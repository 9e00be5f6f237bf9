package io.gpupool.backend.cuda;

import io.gpupool.memory.AllocationStream;
import io.gpupool.memory.metric.AllocatorMode;
import io.gpupool.memory.DeviceAllocator;
import io.gpupool.memory.DeviceBlock;
import io.gpupool.memory.pool.DevicePool;
import io.gpupool.memory.PoolConfig;
import io.gpupool.replay.SimulatedChunkSource;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Supplier;

/**
 * Allocation microbenchmark on a real GPU, in one run: the cost of one allocate+release pair through
 * the pool (three variants), through {@code direct} (cuMemAlloc/cuMemFree) and through {@code cuda-async}
 * (cuMemAllocAsync/cuMemFreeAsync with a caching default pool), at 512 B, 64 KiB, 2 MiB and 64 MiB,
 * then the aggregate pairs per second with 1, 4, 8 and 16 threads each owning a stream.
 *
 * <p>Method: per (allocator, size), warm up for one round, then time rounds of back-to-back pairs on one
 * stream for about {@code roundMillis} each and report the best round (the least disturbed one) and the
 * median, in wall-clock time and in the thread's CPU time ({@code bestCpuNanos}, {@code medianCpuNanos}:
 * what the pair costs the core, without the time the thread was descheduled). The JSON also records
 * what one clock read costs on the machine ({@code nanoTimeNanos}, {@code clocksource}): the pool
 * times a sample of its allocations, and a slow clock source makes every sample expensive. Row
 * {@code fence} is not an allocator: it is the fence that a free into the global level records on
 * its stream (record, completion query, close), alone, so that the global pairs can be split into
 * the pool's bookkeeping and the driver's work; {@code fence-no-query} leaves out the query. Rows
 * {@code host-pool} and {@code host-pool-global-only} run the pool over a simulated device that maps,
 * on streams whose fences complete at once: the same bookkeeping as the host's benchmarks, on this
 * machine's processor.
 * Aggregate points: one platform thread per stream, a warm-up round, then {@value #AGGREGATE_ROUNDS}
 * rounds of {@code roundMillis}, best and median reported with the slowest and fastest stream and the
 * garbage collections during the rounds (see {@link #aggregate}). Earlier each point was a single
 * round of 3 x {@code roundMillis} right after 100 warm-up pairs per thread, with no collection
 * first, so one collection or one slow thread start decided the point.
 * Nothing is launched on the GPU, so the numbers are host-side allocator cost (what a request pays
 * before its first kernel). The pool runs in its default two-level mode, in global-only mode and on
 * expandable segments.
 *
 * <p>Global-only with lazy fences off records a fence per free, so it runs twice: {@code pool-global-only} on the normal
 * streams (fence events recycled per stream) and {@code pool-global-only-no-recycle} on streams whose
 * recycler keeps no spare (cuEventCreate + cuEventDestroy per fence, the behaviour before recycling).
 * Each row also reports {@code eventsCreated}, the events its stream created during the row, next to
 * {@code pairs}: with recycling it stays near zero, without it equals the number of fences.
 * {@code pool-global-only-lazy-fences} is global-only with the default lazy fences (no driver call per free).
 * {@code pool-repeat} is the {@code pool} row again, measured last.
 *
 * <p>Run from the GPU bundle: {@code ./run-gpu-tests.sh --main io.gpupool.backend.cuda.AllocBench out.json}
 */
public final class AllocBench {

    private static final long[] SIZES = {512, 64L << 10, 2L << 20, 64L << 20};
    private static final int[] THREADS = {1, 4, 8, 16};
    private static final long THREAD_SIZE = 64L << 10;
    /** Measured rounds per aggregate point (after one warm-up round). */
    private static final int AGGREGATE_ROUNDS = 5;
    /** Longs between two threads' pair counters: 128 bytes, so no two threads write one cache line. */
    private static final int SLOT = 16;
    private static final java.lang.invoke.VarHandle COUNTS =
            java.lang.invoke.MethodHandles.arrayElementVarHandle(long[].class);

    private AllocBench() {
    }

    public static void main(String[] args) throws Exception {
        Path out = Path.of(args.length > 0 ? args[0] : "alloc-bench.json");
        long roundMillis = args.length > 1 ? Long.parseLong(args[1]) : 150;
        CudaBackend backend = CudaBackend.tryCreate().orElseThrow(() -> new IllegalStateException("no CUDA device"));
        CudaDevice device = (CudaDevice) backend.devices().getFirst();
        device.bindToCurrentThread();
        List<CudaStream> streams = new ArrayList<>();
        List<CudaStream> noRecycleStreams = new ArrayList<>();
        for (int i = 0; i < 16; i++) {
            streams.add(device.createStream(i));
            noRecycleStreams.add(new CudaStream(device, i, 0));
        }

        Map<String, Variant> allocators = new LinkedHashMap<>();
        allocators.put("pool", new Variant(() -> new DevicePool(device.plainChunkSource(), PoolConfig.defaults()), streams));
        allocators.put("pool-global-only", new Variant(() -> new DevicePool(device.plainChunkSource(),
                PoolConfig.defaults().withMode(AllocatorMode.GLOBAL_ONLY).withLazyFences(false)), streams));
        allocators.put("pool-global-only-no-recycle", new Variant(() -> new DevicePool(device.plainChunkSource(),
                PoolConfig.defaults().withMode(AllocatorMode.GLOBAL_ONLY).withLazyFences(false)), noRecycleStreams));
        allocators.put("pool-expandable", new Variant(() -> new DevicePool(device.expandableChunkSource(),
                PoolConfig.defaults()), streams));
        allocators.put("direct", new Variant(() -> device.nativeAllocator(AllocatorMode.DIRECT).orElseThrow(), streams));
        allocators.put("cuda-async", new Variant(() -> device.nativeAllocator(AllocatorMode.CUDA_ASYNC).orElseThrow(),
                streams));
        // last, so that the rows before it run on the code they always ran on
        allocators.put("pool-global-only-lazy-fences", new Variant(() -> new DevicePool(device.plainChunkSource(),
                PoolConfig.defaults().withMode(AllocatorMode.GLOBAL_ONLY).withLazyFences(true)), streams));
        // the first row's pool once more, after every other: a difference between the two is the order's (the JIT
        // and its type profiles), not the pool's; pool-expandable, with the same local level, is its other witness
        allocators.put("pool-repeat", allocators.get("pool"));

        StringBuilder json = new StringBuilder();
        json.append("{\n  \"device\": \"").append(device.name()).append("\",\n");
        json.append("  \"totalMemoryBytes\": ").append(device.totalMemory()).append(",\n");
        json.append("  \"roundMillis\": ").append(roundMillis).append(",\n");
        json.append("  \"availableProcessors\": ").append(Runtime.getRuntime().availableProcessors()).append(",\n");
        json.append("  \"nanoTimeNanos\": ").append(String.format(Locale.ROOT, "%.1f", nanoTimeCost())).append(",\n");
        json.append("  \"clocksource\": \"").append(clocksource()).append("\",\n");
        json.append("  \"maxHeapBytes\": ").append(Runtime.getRuntime().maxMemory()).append(",\n");
        json.append("  \"jvmArguments\": \"").append(String.join(" ",
                java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments())
                .replace("\\", "/").replace("\"", "'")).append("\",\n");
        json.append("  \"pairNanos\": [\n");
        boolean first;
        for (boolean query : new boolean[] {true, false}) {
            String name = query ? "fence" : "fence-no-query";
            double[] fence = timedRounds(() -> {
                var recorded = streams.getFirst().recordFence();
                if (query) {
                    recorded.isComplete();
                }
                recorded.close();
            }, roundMillis);
            System.out.printf(Locale.ROOT, "%-27s %10s    best %10.0f ns/pair  median %10.0f ns/pair  cpu %6.0f / %6.0f%n",
                    name, "-", fence[0], fence[1], fence[3], fence[4]);
            json.append(query ? "" : ",\n").append(String.format(Locale.ROOT,
                    "    {\"allocator\": \"%s\", \"bytes\": 0, \"bestNanos\": %.1f, \"medianNanos\": %.1f,"
                            + " \"pairs\": %d, \"bestCpuNanos\": %.1f, \"medianCpuNanos\": %.1f}",
                    name, fence[0], fence[1], (long) fence[2], fence[3], fence[4]));
        }
        // Untimed, on a pool of its own: the first measured row would otherwise time the pool's path while the
        // JIT still compiles it (the same code measured later, at another size, is much faster).
        Variant pool = allocators.get("pool");
        try (DeviceAllocator warmUp = pool.allocator().get()) {
            for (long size : SIZES) {
                singleStream(warmUp, pool.streams().getFirst(), size, roundMillis);
            }
            pool.streams().getFirst().synchronize();
        }
        for (var entry : allocators.entrySet()) {
            DeviceAllocator allocator = entry.getValue().allocator().get();
            CudaStream stream = entry.getValue().streams().getFirst();
            for (long size : SIZES) {
                long createdBefore = stream.events().created();
                long acquiredBefore = createdBefore + stream.events().reused();
                double[] result = singleStream(allocator, stream, size, roundMillis);
                long eventsCreated = stream.events().created() - createdBefore;
                // every fence takes one event (nothing else runs on the stream here): lazy fences take none
                long fencesRecorded = stream.events().created() + stream.events().reused() - acquiredBefore;
                System.out.printf(Locale.ROOT, "%-27s %10d B  best %10.0f ns/pair  median %10.0f ns/pair"
                        + "  cpu %6.0f / %6.0f  %d events created, %d fences recorded for %d pairs%n",
                        entry.getKey(), size, result[0], result[1], result[3], result[4], eventsCreated, fencesRecorded,
                        (long) result[2]);
                json.append(",\n").append(String.format(Locale.ROOT,
                        "    {\"allocator\": \"%s\", \"bytes\": %d, \"bestNanos\": %.1f, \"medianNanos\": %.1f,"
                                + " \"pairs\": %d, \"eventsCreated\": %d, \"fencesRecorded\": %d, \"bestCpuNanos\": %.1f,"
                                + " \"medianCpuNanos\": %.1f}",
                        entry.getKey(), size, result[0], result[1], (long) result[2], eventsCreated, fencesRecorded,
                        result[3], result[4]));
            }
            stream.synchronize();
            allocator.close();
        }
        // after the device allocators, so that their rows run on code compiled for their own streams, as before
        for (var mode : List.of(AllocatorMode.TWO_LEVEL, AllocatorMode.GLOBAL_ONLY)) {
            String name = mode == AllocatorMode.TWO_LEVEL ? "host-pool" : "host-pool-global-only";
            DeviceAllocator allocator = new DevicePool(SimulatedChunkSource.withMapping("host", device.totalMemory()),
                    PoolConfig.defaults().withMode(mode));
            AllocationStream stream = new HostStream(0);
            for (long size : SIZES) {
                double[] result = singleStream(allocator, stream, size, roundMillis);
                System.out.printf(Locale.ROOT, "%-27s %10d B  best %10.0f ns/pair  median %10.0f ns/pair  cpu %6.0f / %6.0f%n",
                        name, size, result[0], result[1], result[3], result[4]);
                json.append(",\n").append(String.format(Locale.ROOT,
                        "    {\"allocator\": \"%s\", \"bytes\": %d, \"bestNanos\": %.1f, \"medianNanos\": %.1f,"
                                + " \"pairs\": %d, \"bestCpuNanos\": %.1f, \"medianCpuNanos\": %.1f}",
                        name, size, result[0], result[1], (long) result[2], result[3], result[4]));
            }
            allocator.close();
        }
        json.append("\n  ],\n  \"aggregate\": [\n");
        first = true;
        for (var entry : allocators.entrySet()) {
            DeviceAllocator allocator = entry.getValue().allocator().get();
            List<CudaStream> variantStreams = entry.getValue().streams();
            for (int threads : THREADS) {
                Aggregate point = aggregate(device::bindToCurrentThread, allocator, variantStreams.subList(0, threads),
                        roundMillis);
                System.out.printf(Locale.ROOT, "%-27s %2d streams  best %,14.0f  median %,14.0f pairs/s (%d B);"
                                + " per stream %,d .. %,d; %d GCs, %d ms%n",
                        entry.getKey(), threads, point.best(), point.median(), THREAD_SIZE, point.minStream(),
                        point.maxStream(), point.gcs(), point.gcMillis());
                json.append(first ? "" : ",\n").append(String.format(Locale.ROOT,
                        "    {\"allocator\": \"%s\", \"streams\": %d, \"bytes\": %d, \"pairsPerSecond\": %.0f,"
                                + " \"medianPairsPerSecond\": %.0f, \"slowestStreamPairsPerSecond\": %d,"
                                + " \"fastestStreamPairsPerSecond\": %d, \"gcs\": %d, \"gcMillis\": %d}",
                        entry.getKey(), threads, THREAD_SIZE, point.best(), point.median(), point.minStream(),
                        point.maxStream(), point.gcs(), point.gcMillis()));
                first = false;
            }
            for (CudaStream stream : variantStreams) {
                stream.synchronize();
            }
            allocator.close();
        }
        json.append("\n  ]\n}\n");
        for (CudaStream stream : streams) {
            stream.close();
        }
        for (CudaStream stream : noRecycleStreams) {
            stream.close();
        }
        backend.close();
        Files.writeString(out, json);
        System.out.println("wrote " + out.toAbsolutePath());
    }

    /** A stream whose fences complete at once (the {@code host-pool} rows: the pool's bookkeeping without a driver). */
    private record HostStream(int ordinal) implements AllocationStream {
        @Override
        public io.gpupool.memory.StreamFence recordFence() {
            return io.gpupool.memory.StreamFence.completed();
        }
    }

    /** An allocator under test and the streams it runs on. */
    private record Variant(Supplier<DeviceAllocator> allocator, List<CudaStream> streams) {
    }

    /**
     * {best, median} wall-clock nanoseconds per allocate+release pair on one stream, the pairs run
     * (warm-up included), {best, median} thread CPU nanoseconds per pair.
     */
    private static double[] singleStream(DeviceAllocator allocator, AllocationStream stream, long size, long roundMillis) {
        return timedRounds(() -> allocator.allocate(size, stream).release(), roundMillis);
    }

    /** One warm-up round, then 7 rounds of {@code pair} for {@code roundMillis} each; see {@link #singleStream}. */
    private static double[] timedRounds(Runnable pair, long roundMillis) {
        var threads = java.lang.management.ManagementFactory.getThreadMXBean();
        int rounds = 7;
        long total = 0;
        double[] perPair = new double[rounds];
        double[] cpuPerPair = new double[rounds];
        for (int r = -1; r < rounds; r++) {                        // round -1: warm-up, not measured
            long deadline = System.nanoTime() + roundMillis * 1_000_000;
            long pairs = 0;
            long cpuStart = threads.getCurrentThreadCpuTime();
            long start = System.nanoTime();
            long now;
            do {
                for (int i = 0; i < 16; i++) {
                    pair.run();
                }
                pairs += 16;
                now = System.nanoTime();
            } while (now < deadline);
            long cpu = threads.getCurrentThreadCpuTime() - cpuStart;
            total += pairs;
            if (r >= 0) {
                perPair[r] = (double) (now - start) / pairs;
                cpuPerPair[r] = (double) cpu / pairs;
            }
        }
        java.util.Arrays.sort(perPair);
        java.util.Arrays.sort(cpuPerPair);
        return new double[] {perPair[0], perPair[rounds / 2], total, cpuPerPair[0], cpuPerPair[rounds / 2]};
    }

    /** Nanoseconds one System.nanoTime() call costs here (the best of 5 runs of 200 000 calls). */
    private static double nanoTimeCost() {
        double best = Double.MAX_VALUE;
        long sink = 0;
        for (int r = 0; r < 5; r++) {
            long start = System.nanoTime();
            for (int i = 0; i < 200_000; i++) {
                sink += System.nanoTime();
            }
            best = Math.min(best, (System.nanoTime() - start) / 200_000.0);
        }
        return sink == 42 ? -1 : best;
    }

    private static String clocksource() {
        try {
            return Files.readString(Path.of("/sys/devices/system/clocksource/clocksource0/current_clocksource")).strip();
        } catch (java.io.IOException | RuntimeException e) {
            return "unknown";
        }
    }

    /**
     * Aggregate pairs per second with one thread per stream. The threads start once per point, do a
     * warm-up of {@code millis} (every stream's cache filled, code compiled), then the main thread
     * measures {@value #AGGREGATE_ROUNDS} rounds of {@code millis} each by sampling per-thread pair
     * counters (each in its own 128-byte slot, written with setOpaque every 16 pairs: the benchmark
     * adds no shared cache line of its own). The heap is collected before the point so that every
     * point starts from the same state (a collection moves the pool's caches, and where it put them
     * decided whether streams could share cache lines before the caches were padded).
     */
    static Aggregate aggregate(Runnable bindThread, DeviceAllocator allocator, List<? extends AllocationStream> streams,
                               long millis) throws Exception {
        int threads = streams.size();
        System.gc();
        CyclicBarrier start = new CyclicBarrier(threads + 1);
        AtomicBoolean stop = new AtomicBoolean();
        long[] counts = new long[(threads + 2) * SLOT];
        List<Thread> workers = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            int slot = (t + 1) * SLOT;
            AllocationStream stream = streams.get(t);
            workers.add(Thread.ofPlatform().name("alloc-bench-" + t).start(() -> {
                bindThread.run();
                try {
                    start.await();
                } catch (Exception e) {
                    throw new IllegalStateException(e);
                }
                long pairs = 0;
                while (!stop.get()) {
                    for (int i = 0; i < 16; i++) {
                        DeviceBlock block = allocator.allocate(THREAD_SIZE, stream);
                        block.release();
                    }
                    pairs += 16;
                    COUNTS.setOpaque(counts, slot, pairs);
                }
            }));
        }
        start.await();
        Thread.sleep(millis);                                      // warm-up, not measured
        double[] rounds = new double[AGGREGATE_ROUNDS];
        long minStream = Long.MAX_VALUE;
        long maxStream = 0;
        long gcBefore = gcCount();
        long gcMillisBefore = gcMillis();
        long[] before = snapshot(counts, threads);
        long begin = System.nanoTime();
        for (int r = 0; r < AGGREGATE_ROUNDS; r++) {
            long roundStart = System.nanoTime();
            long[] first = snapshot(counts, threads);
            Thread.sleep(millis);
            long[] last = snapshot(counts, threads);
            long elapsed = System.nanoTime() - roundStart;
            long total = 0;
            for (int t = 0; t < threads; t++) {
                total += last[t] - first[t];
            }
            rounds[r] = total * 1e9 / elapsed;
        }
        long measured = System.nanoTime() - begin;
        long[] after = snapshot(counts, threads);
        long gcs = gcCount() - gcBefore;
        long gcPause = gcMillis() - gcMillisBefore;
        stop.set(true);
        for (Thread worker : workers) {
            worker.join();
        }
        for (int t = 0; t < threads; t++) {
            long perSecond = (long) ((after[t] - before[t]) * 1e9 / measured);
            minStream = Math.min(minStream, perSecond);
            maxStream = Math.max(maxStream, perSecond);
        }
        java.util.Arrays.sort(rounds);
        return new Aggregate(rounds[rounds.length - 1], rounds[rounds.length / 2], minStream, maxStream, gcs, gcPause);
    }

    /** One aggregate point: best and median round (pairs/s, all streams), slowest and fastest stream, GCs meanwhile. */
    record Aggregate(double best, double median, long minStream, long maxStream, long gcs, long gcMillis) {
    }

    private static long[] snapshot(long[] counts, int threads) {
        long[] copy = new long[threads];
        for (int t = 0; t < threads; t++) {
            copy[t] = (long) COUNTS.getOpaque(counts, (t + 1) * SLOT);
        }
        return copy;
    }

    private static long gcCount() {
        long total = 0;
        for (var gc : java.lang.management.ManagementFactory.getGarbageCollectorMXBeans()) {
            total += Math.max(0, gc.getCollectionCount());
        }
        return total;
    }

    private static long gcMillis() {
        long total = 0;
        for (var gc : java.lang.management.ManagementFactory.getGarbageCollectorMXBeans()) {
            total += Math.max(0, gc.getCollectionTime());
        }
        return total;
    }
}
