package io.gpupool.backend.cuda;

import io.gpupool.memory.AllocationStream;
import io.gpupool.memory.AllocatorMode;
import io.gpupool.memory.DeviceAllocator;
import io.gpupool.memory.DeviceBlock;
import io.gpupool.memory.DevicePool;
import io.gpupool.memory.PoolConfig;

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
 * <p>Method: per (allocator, size), warm up, then time rounds of back-to-back pairs on one stream for
 * about {@code roundMillis} each and report the best round (the least disturbed one) and the median.
 * Nothing is launched on the GPU, so the numbers are host-side allocator cost (what a request pays
 * before its first kernel). The pool runs in its default two-level mode, in global-only mode and on
 * expandable segments.
 *
 * <p>Global-only records a fence per free, so it runs twice: {@code pool-global-only} on the normal
 * streams (fence events recycled per stream) and {@code pool-global-only-no-recycle} on streams whose
 * recycler keeps no spare (cuEventCreate + cuEventDestroy per fence, the behaviour before recycling).
 * Each row also reports {@code eventsCreated}, the events its stream created during the row, next to
 * {@code pairs}: with recycling it stays near zero, without it equals the number of fences.
 *
 * <p>Run from the GPU bundle: {@code ./run-gpu-tests.sh --main io.gpupool.backend.cuda.AllocBench out.json}
 */
public final class AllocBench {

    private static final long[] SIZES = {512, 64L << 10, 2L << 20, 64L << 20};
    private static final int[] THREADS = {1, 4, 8, 16};
    private static final long THREAD_SIZE = 64L << 10;

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
                PoolConfig.defaults().withMode(AllocatorMode.GLOBAL_ONLY)), streams));
        allocators.put("pool-global-only-no-recycle", new Variant(() -> new DevicePool(device.plainChunkSource(),
                PoolConfig.defaults().withMode(AllocatorMode.GLOBAL_ONLY)), noRecycleStreams));
        allocators.put("pool-expandable", new Variant(() -> new DevicePool(device.expandableChunkSource(),
                PoolConfig.defaults()), streams));
        allocators.put("direct", new Variant(() -> device.nativeAllocator(AllocatorMode.DIRECT).orElseThrow(), streams));
        allocators.put("cuda-async", new Variant(() -> device.nativeAllocator(AllocatorMode.CUDA_ASYNC).orElseThrow(),
                streams));

        StringBuilder json = new StringBuilder();
        json.append("{\n  \"device\": \"").append(device.name()).append("\",\n");
        json.append("  \"totalMemoryBytes\": ").append(device.totalMemory()).append(",\n");
        json.append("  \"roundMillis\": ").append(roundMillis).append(",\n");
        json.append("  \"pairNanos\": [\n");
        boolean first = true;
        for (var entry : allocators.entrySet()) {
            DeviceAllocator allocator = entry.getValue().allocator().get();
            CudaStream stream = entry.getValue().streams().getFirst();
            for (long size : SIZES) {
                long createdBefore = stream.events().created();
                double[] result = singleStream(allocator, stream, size, roundMillis);
                long eventsCreated = stream.events().created() - createdBefore;
                System.out.printf(Locale.ROOT, "%-27s %10d B  best %10.0f ns/pair  median %10.0f ns/pair"
                        + "  %d events created for %d pairs%n",
                        entry.getKey(), size, result[0], result[1], eventsCreated, (long) result[2]);
                json.append(first ? "" : ",\n").append(String.format(Locale.ROOT,
                        "    {\"allocator\": \"%s\", \"bytes\": %d, \"bestNanos\": %.1f, \"medianNanos\": %.1f,"
                                + " \"pairs\": %d, \"eventsCreated\": %d}",
                        entry.getKey(), size, result[0], result[1], (long) result[2], eventsCreated));
                first = false;
            }
            stream.synchronize();
            allocator.close();
        }
        json.append("\n  ],\n  \"aggregate\": [\n");
        first = true;
        for (var entry : allocators.entrySet()) {
            DeviceAllocator allocator = entry.getValue().allocator().get();
            List<CudaStream> variantStreams = entry.getValue().streams();
            for (int threads : THREADS) {
                double pairsPerSecond = aggregate(device, allocator, variantStreams.subList(0, threads), roundMillis * 3);
                System.out.printf(Locale.ROOT, "%-27s %2d streams  %,14.0f pairs/s (%d B)%n",
                        entry.getKey(), threads, pairsPerSecond, THREAD_SIZE);
                json.append(first ? "" : ",\n").append(String.format(Locale.ROOT,
                        "    {\"allocator\": \"%s\", \"streams\": %d, \"bytes\": %d, \"pairsPerSecond\": %.0f}",
                        entry.getKey(), threads, THREAD_SIZE, pairsPerSecond));
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

    /** An allocator under test and the streams it runs on. */
    private record Variant(Supplier<DeviceAllocator> allocator, List<CudaStream> streams) {
    }

    /** {best, median} nanoseconds per allocate+release pair on one stream, then the pairs run (warm-up included). */
    private static double[] singleStream(DeviceAllocator allocator, AllocationStream stream, long size, long roundMillis) {
        for (int i = 0; i < 200; i++) {
            allocator.allocate(size, stream).release();
        }
        int rounds = 7;
        long total = 200;
        double[] perPair = new double[rounds];
        for (int r = 0; r < rounds; r++) {
            long deadline = System.nanoTime() + roundMillis * 1_000_000;
            long pairs = 0;
            long start = System.nanoTime();
            long now;
            do {
                for (int i = 0; i < 16; i++) {
                    allocator.allocate(size, stream).release();
                }
                pairs += 16;
                now = System.nanoTime();
            } while (now < deadline);
            perPair[r] = (double) (now - start) / pairs;
            total += pairs;
        }
        java.util.Arrays.sort(perPair);
        return new double[] {perPair[0], perPair[rounds / 2], total};
    }

    /** Pairs per second summed over one thread per stream, each looping allocate+release for {@code millis}. */
    private static double aggregate(CudaDevice device, DeviceAllocator allocator, List<CudaStream> streams, long millis)
            throws Exception {
        int threads = streams.size();
        CyclicBarrier start = new CyclicBarrier(threads + 1);
        AtomicBoolean stop = new AtomicBoolean();
        long[] counts = new long[threads];
        List<Thread> workers = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            int index = t;
            CudaStream stream = streams.get(t);
            workers.add(Thread.ofPlatform().start(() -> {
                device.bindToCurrentThread();
                for (int i = 0; i < 100; i++) {
                    allocator.allocate(THREAD_SIZE, stream).release();
                }
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
                }
                counts[index] = pairs;
            }));
        }
        start.await();
        long begin = System.nanoTime();
        Thread.sleep(millis);
        stop.set(true);
        for (Thread worker : workers) {
            worker.join();
        }
        long elapsed = System.nanoTime() - begin;
        long total = 0;
        for (long count : counts) {
            total += count;
        }
        return total * 1e9 / elapsed;
    }
}
