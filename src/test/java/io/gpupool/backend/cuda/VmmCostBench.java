package io.gpupool.backend.cuda;

import io.gpupool.backend.KernelFunction;
import io.gpupool.memory.metric.AllocatorMode;
import io.gpupool.memory.DeviceAllocator;
import io.gpupool.memory.DeviceBlock;
import io.gpupool.memory.StreamFence;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;

/**
 * What the driver's virtual memory calls cost on a real GPU, for the pool's MAPPED growth policy:
 * <ol>
 *   <li>{@code idle}: {@link CudaChunkSource#map} and {@link CudaChunkSource#unmap} of 1 granule and of 64
 *       granules in one call, in two variants run twice each, alternating: one cuMemSetAccess per map call
 *       and one cuMemUnmap per granule (the default), or one cuMemSetAccess per granule and one cuMemUnmap
 *       over the whole range; next to
 *       cuMemAlloc / cuMemFree of the same sizes, and mapPhysical / unmapPhysical of 64 granules of kept
 *       allocations (1- and 16-granule extents: the pool's retained handles, no cuMemCreate or cuMemRelease);
 *       best and median over the repetitions, per call and per granule.</li>
 *   <li>{@code components}: each driver call of a 1-granule map/unmap alone (cuMemCreate, cuMemMap,
 *       cuMemSetAccess, cuMemUnmap, cuMemRelease).</li>
 *   <li>{@code duringKernel}: while a ~100 ms spin kernel runs on another stream, the host time of one
 *       map, unmap, reserve, release, cuMemAlloc, cuMemFree, cuMemAllocAsync and cuMemFreeAsync of
 *       unrelated memory. {@code waitedForKernel} = the call took more than 50 ms;
 *       {@code kernelRunningAfterCall} = the kernel's fence was still pending when the call returned.</li>
 * </ol>
 * Nothing else runs on the device. Run from the GPU bundle:
 * {@code ./run-gpu-tests.sh --main io.gpupool.backend.cuda.VmmCostBench vmm-cost.json [repetitions]}
 */
public final class VmmCostBench {

    private static final long MIB = 1L << 20;
    private static final long SPIN_MILLIS = 100;
    private static final long WAITED_NANOS = 50_000_000L;
    private static final int KERNEL_REPS = 3;

    private final CudaDevice device;
    private final CudaChunkSource source;
    private final long granule;
    private final int repetitions;
    private final StringBuilder json = new StringBuilder();

    private VmmCostBench(CudaDevice device, int repetitions) {
        this.device = device;
        this.source = device.plainChunkSource();
        this.granule = source.granularity();
        this.repetitions = repetitions;
    }

    public static void main(String[] args) throws Exception {
        Path out = Path.of(args.length > 0 ? args[0] : "vmm-cost.json");
        int repetitions = args.length > 1 ? Integer.parseInt(args[1]) : 200;
        CudaBackend backend = CudaBackend.tryCreate().orElseThrow(() -> new IllegalStateException("no CUDA device"));
        try {
            CudaDevice device = (CudaDevice) backend.devices().getFirst();
            device.bindToCurrentThread();
            if (device.plainChunkSource().virtualMemory().isEmpty()) {
                throw new IllegalStateException(device + " cannot map memory");
            }
            VmmCostBench bench = new VmmCostBench(device, repetitions);
            bench.run();
            Files.writeString(out, bench.json);
            System.out.println("wrote " + out.toAbsolutePath());
        } finally {
            backend.close();
        }
    }

    private void run() throws Exception {
        json.append("{\n  \"device\": \"").append(device.name()).append("\",\n");
        json.append("  \"granularityBytes\": ").append(granule).append(",\n");
        json.append("  \"repetitions\": ").append(repetitions).append(",\n");
        json.append("  \"idle\": [\n");
        idle();
        json.append("\n  ],\n  \"components\": [\n");
        components();
        json.append("\n  ],\n");
        duringKernel();
        json.append("}\n");
    }

    private void idle() {
        long base = source.reserveAddressSpace(64 * granule);
        List<String> rows = new ArrayList<>();
        boolean[] variants = {true, false, true, false};
        for (int pass = 0; pass < variants.length; pass++) {
            boolean variant = variants[pass];
            String suffix = " [pass " + (pass / 2 + 1) + "]";
            source.unmapWholeRange = variant;
            source.accessPerGranule = variant;
            String mapName = variant ? "map (cuMemCreate+cuMemMap+cuMemSetAccess per granule)"
                    : "map (cuMemCreate+cuMemMap per granule, one cuMemSetAccess)";
            String unmapName = variant ? "unmap (one cuMemUnmap over the range)" : "unmap (cuMemUnmap per granule)";
            for (int granules : new int[] {1, 64}) {
                long bytes = granules * granule;
                long[] mapNanos = new long[repetitions];
                long[] unmapNanos = new long[repetitions];
                for (int i = -20; i < repetitions; i++) {
                    long t0 = System.nanoTime();
                    source.map(base, bytes);
                    long t1 = System.nanoTime();
                    source.unmap(base, bytes);
                    long t2 = System.nanoTime();
                    if (i >= 0) {
                        mapNanos[i] = t1 - t0;
                        unmapNanos[i] = t2 - t1;
                    }
                }
                rows.add(row(mapName + suffix, granules, mapNanos));
                rows.add(row(unmapName + suffix, granules, unmapNanos));
            }
        }
        source.unmapWholeRange = false;
        source.accessPerGranule = false;
        // extents: one physical allocation per extent (what the pool uses for large tensors)
        for (int extentGranules : new int[] {2, 16, 64}) {
            long bytes = 64 * granule;
            long extentBytes = extentGranules * granule;
            long[] mapNanos = new long[repetitions];
            long[] unmapNanos = new long[repetitions];
            for (int i = -10; i < repetitions; i++) {
                long t0 = System.nanoTime();
                source.map(base, bytes, extentBytes);
                long t1 = System.nanoTime();
                source.unmap(base, bytes);
                long t2 = System.nanoTime();
                if (i >= 0) {
                    mapNanos[i] = t1 - t0;
                    unmapNanos[i] = t2 - t1;
                }
            }
            rows.add(row("map in extents of " + extentGranules + " granules", 64, mapNanos));
            rows.add(row("unmap in extents of " + extentGranules + " granules", 64, unmapNanos));
        }
        // kept physical allocations (the pool's retained handles): map and unmap without create and release
        for (int extentGranules : new int[] {1, 16}) {
            long extentBytes = extentGranules * granule;
            int count = 64 / extentGranules;
            long[] handles = new long[count];
            for (int k = 0; k < count; k++) {
                handles[k] = source.createPhysical(extentBytes);
            }
            long[] out = new long[count];
            long[] mapNanos = new long[repetitions];
            long[] unmapNanos = new long[repetitions];
            for (int i = -10; i < repetitions; i++) {
                long t0 = System.nanoTime();
                source.mapPhysical(base, extentBytes, handles, count);
                long t1 = System.nanoTime();
                source.unmapPhysical(base, extentBytes, out, count);
                long t2 = System.nanoTime();
                if (i >= 0) {
                    mapNanos[i] = t1 - t0;
                    unmapNanos[i] = t2 - t1;
                }
            }
            for (long handle : handles) {
                source.releasePhysical(handle);
            }
            rows.add(row("mapPhysical of kept handles, extents of " + extentGranules + " granules", 64, mapNanos));
            rows.add(row("unmapPhysical keeping the handles, extents of " + extentGranules + " granules", 64, unmapNanos));
        }
        source.releaseAddressSpace(base, 64 * granule);
        for (long bytes : new long[] {granule, 64 * granule}) {
            long[] allocNanos = new long[repetitions];
            long[] freeNanos = new long[repetitions];
            for (int i = -10; i < repetitions; i++) {
                long t0 = System.nanoTime();
                long address = source.allocate(bytes);
                long t1 = System.nanoTime();
                source.free(address, bytes);
                long t2 = System.nanoTime();
                if (i >= 0) {
                    allocNanos[i] = t1 - t0;
                    freeNanos[i] = t2 - t1;
                }
            }
            rows.add(row("cuMemAlloc", (int) (bytes / granule), allocNanos));
            rows.add(row("cuMemFree", (int) (bytes / granule), freeNanos));
        }
        json.append(String.join(",\n", rows));
    }

    private String row(String op, int granules, long[] nanos) {
        long[] sorted = nanos.clone();
        Arrays.sort(sorted);
        double best = sorted[0] / 1e3;
        double median = sorted[sorted.length / 2] / 1e3;
        System.out.printf(Locale.ROOT, "%-62s %3d granules  best %9.1f us  median %9.1f us  (%7.1f us/granule)%n",
                op, granules, best, median, median / granules);
        return String.format(Locale.ROOT, "    {\"op\": \"%s\", \"granules\": %d, \"bestMicros\": %.1f, \"medianMicros\": %.1f,"
                        + " \"bestMicrosPerGranule\": %.2f, \"medianMicrosPerGranule\": %.2f}",
                op, granules, best, median, best / granules, median / granules);
    }

    private void components() {
        LibCuda lib = LibCuda.get();
        int index = device.index();
        long base = lib.addressReserve(granule, granule);
        long[][] nanos = new long[5][repetitions];
        for (int i = -10; i < repetitions; i++) {
            long t0 = System.nanoTime();
            long handle = lib.create(granule, index);
            long t1 = System.nanoTime();
            lib.map(base, granule, handle);
            long t2 = System.nanoTime();
            lib.setAccessReadWrite(base, granule, index);
            long t3 = System.nanoTime();
            lib.unmap(base, granule);
            long t4 = System.nanoTime();
            lib.release(handle);
            long t5 = System.nanoTime();
            if (i >= 0) {
                nanos[0][i] = t1 - t0;
                nanos[1][i] = t2 - t1;
                nanos[2][i] = t3 - t2;
                nanos[3][i] = t4 - t3;
                nanos[4][i] = t5 - t4;
            }
        }
        lib.addressFree(base, granule);
        String[] calls = {"cuMemCreate", "cuMemMap", "cuMemSetAccess", "cuMemUnmap", "cuMemRelease"};
        List<String> rows = new ArrayList<>();
        for (int c = 0; c < calls.length; c++) {
            rows.add(row(calls[c], 1, nanos[c]));
        }
        json.append(String.join(",\n", rows));
    }

    /** One operation timed while the spin kernel runs: prepared while idle, undone after the kernel. */
    private interface Step {
        void run();
    }

    private record KernelCase(String op, Step setup, Step timed, Step teardown) {
    }

    private void duringKernel() throws Exception {
        CudaStream busy = device.createStream(1);
        CudaStream other = device.createStream(2);
        KernelFunction spin = device.loadModule("backend_test_kernels", CudaTestSupport.testPtx()).function("spin_then_fill");
        long scratch = source.allocate(granule);
        DeviceAllocator async = device.nativeAllocator(AllocatorMode.CUDA_ASYNC).orElseThrow();
        async.allocate(64 * MIB, other).release();   // the driver pool caches 64 MiB from here on
        other.synchronize();

        CudaTestSupport.spinThenFill(busy, spin, scratch, 1, 1, 10);   // load and warm the kernel
        busy.synchronize();
        long k0 = System.nanoTime();
        CudaTestSupport.spinThenFill(busy, spin, scratch, 1, 1, SPIN_MILLIS);
        busy.synchronize();
        double kernelMillis = (System.nanoTime() - k0) / 1e6;

        long base = source.reserveAddressSpace(128 * granule);
        long[] held = new long[1];
        DeviceBlock[] block = new DeviceBlock[1];
        long bytes64 = 64 * granule;
        List<KernelCase> cases = List.of(
                new KernelCase("map 1 granule", () -> { }, () -> source.map(base, granule), () -> source.unmap(base, granule)),
                new KernelCase("unmap 1 granule", () -> source.map(base, granule), () -> source.unmap(base, granule), () -> { }),
                new KernelCase("map 64 granules", () -> { }, () -> source.map(base, bytes64), () -> source.unmap(base, bytes64)),
                new KernelCase("unmap 64 granules", () -> source.map(base, bytes64), () -> source.unmap(base, bytes64), () -> { }),
                new KernelCase("reserveAddressSpace 128 MiB", () -> { },
                        () -> held[0] = source.reserveAddressSpace(128 * MIB),
                        () -> source.releaseAddressSpace(held[0], 128 * MIB)),
                new KernelCase("releaseAddressSpace 128 MiB", () -> held[0] = source.reserveAddressSpace(128 * MIB),
                        () -> source.releaseAddressSpace(held[0], 128 * MIB), () -> { }),
                new KernelCase("cuMemAlloc 64 MiB", () -> { }, () -> held[0] = source.allocate(64 * MIB),
                        () -> source.free(held[0], 64 * MIB)),
                new KernelCase("cuMemFree 64 MiB", () -> held[0] = source.allocate(64 * MIB),
                        () -> source.free(held[0], 64 * MIB), () -> { }),
                new KernelCase("cuMemAllocAsync 64 MiB (other stream, cached)", () -> { },
                        () -> block[0] = async.allocate(64 * MIB, other), () -> {
                            block[0].release();
                            other.synchronize();
                        }),
                new KernelCase("cuMemFreeAsync 64 MiB (other stream)", () -> block[0] = async.allocate(64 * MIB, other),
                        () -> block[0].release(), other::synchronize));

        json.append("  \"duringKernel\": {\n    \"spinKernelMillis\": ").append(String.format(Locale.ROOT, "%.1f", kernelMillis))
                .append(",\n    \"repetitions\": ").append(KERNEL_REPS).append(",\n    \"ops\": [\n");
        System.out.printf(Locale.ROOT, "spin kernel alone: %.1f ms%n", kernelMillis);
        List<String> rows = new ArrayList<>();
        for (KernelCase c : cases) {
            long[] nanos = new long[KERNEL_REPS];
            boolean runningAfterEveryCall = true;
            for (int r = 0; r < KERNEL_REPS; r++) {
                c.setup().run();
                busy.synchronize();
                CudaTestSupport.spinThenFill(busy, spin, scratch, 1, 1, SPIN_MILLIS);
                StreamFence kernelDone = busy.recordFence();
                Thread.sleep(2);   // the kernel is surely running on the device by now
                long t0 = System.nanoTime();
                c.timed().run();
                nanos[r] = System.nanoTime() - t0;
                runningAfterEveryCall &= !kernelDone.isComplete();
                busy.synchronize();
                kernelDone.close();
                c.teardown().run();
            }
            long[] sorted = nanos.clone();
            Arrays.sort(sorted);
            boolean waited = sorted[sorted.length - 1] > WAITED_NANOS;
            System.out.printf(Locale.ROOT, "during kernel: %-46s median %10.1f us  max %10.1f us  waited %-5b running after %b%n",
                    c.op(), sorted[KERNEL_REPS / 2] / 1e3, sorted[KERNEL_REPS - 1] / 1e3, waited, runningAfterEveryCall);
            rows.add(String.format(Locale.ROOT, "      {\"op\": \"%s\", \"medianMicros\": %.1f, \"maxMicros\": %.1f,"
                            + " \"waitedForKernel\": %b, \"kernelRunningAfterCall\": %b}",
                    c.op(), sorted[KERNEL_REPS / 2] / 1e3, sorted[KERNEL_REPS - 1] / 1e3, waited, runningAfterEveryCall));
        }
        json.append(String.join(",\n", rows)).append("\n    ]\n  }\n");
        source.releaseAddressSpace(base, 128 * granule);
        async.close();
        source.free(scratch, granule);
        busy.close();
        other.close();
    }
}
