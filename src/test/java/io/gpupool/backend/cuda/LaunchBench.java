package io.gpupool.backend.cuda;

import io.gpupool.backend.KernelFunction;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.function.Function;

import static java.lang.foreign.ValueLayout.ADDRESS;

/**
 * Host cost of one kernel launch through {@link CudaStream#launch}, by launch path ({@link JCudaKernelLauncher},
 * {@link FfmKernelLauncher}), for a trivial kernel with eleven mixed parameters ({@code echo_arguments} with a null
 * output: it does nothing) and one with none ({@code noop}):
 * <ol>
 *   <li>{@code enqueue}: a spin kernel keeps the GPU busy while a batch of launches is enqueued behind it, so the
 *       time per launch is the host's alone (boxing the arguments, marshalling, the driver's enqueue); rounds
 *       alternate between the paths, min / median / p90 over the rounds;</li>
 *   <li>{@code sustained}: many launches back to back with the GPU running them, then a synchronize: the rate a
 *       forward pass of small kernels sees (the slower of host and GPU);</li>
 *   <li>{@code driverFloor}: the FFM binding called directly with arguments written once, behind a spin kernel
 *       like {@code enqueue}: what the driver's enqueue costs with no Java work per launch.</li>
 * </ol>
 * Nothing else runs on the device. Run from the GPU bundle:
 * {@code ./run-gpu-tests.sh --main io.gpupool.backend.cuda.LaunchBench launch-bench.json [batch] [rounds]}
 */
public final class LaunchBench {

    private static final long SPIN_MILLIS = 10;
    private static final int SUSTAINED_LAUNCHES = 20_000;
    private static final List<String> PATHS = List.of("jcuda", "ffm");

    private final CudaDevice device;
    private final int batch;
    private final int rounds;
    private final KernelFunction echo;
    private final KernelFunction noop;
    private final KernelFunction spin;
    private final Map<String, CudaStream> streams = new LinkedHashMap<>();
    private final long scratch;

    private LaunchBench(CudaDevice device, int batch, int rounds) {
        this.device = device;
        this.batch = batch;
        this.rounds = rounds;
        var module = device.loadModule("backend_test_kernels", CudaTestSupport.testPtx());
        this.echo = module.function("echo_arguments");
        this.noop = module.function("noop");
        this.spin = module.function("spin_then_fill");
        this.scratch = device.plainChunkSource().allocate(2L << 20);
        for (String path : PATHS) {
            Function<Cu.StreamHandle, KernelLauncher> launchers = path.equals("ffm")
                    ? handle -> new FfmKernelLauncher(LibCudaLaunch.get().orElseThrow(
                            () -> new IllegalStateException("cuLaunchKernel cannot be bound through FFM")), handle.address())
                    : JCudaKernelLauncher::new;
            streams.put(path, new CudaStream(device, streams.size(), CudaStream.SPARE_EVENTS, launchers));
        }
    }

    public static void main(String[] args) throws Exception {
        Path out = Path.of(args.length > 0 ? args[0] : "launch-bench.json");
        int batch = args.length > 1 ? Integer.parseInt(args[1]) : 512;
        int rounds = args.length > 2 ? Integer.parseInt(args[2]) : 60;
        CudaBackend backend = CudaBackend.tryCreate().orElseThrow(() -> new IllegalStateException("no CUDA device"));
        try {
            CudaDevice device = (CudaDevice) backend.devices().getFirst();
            device.bindToCurrentThread();
            LaunchBench bench = new LaunchBench(device, batch, rounds);
            String json = bench.run();
            Files.writeString(out, json);
            System.out.println("wrote " + out.toAbsolutePath());
        } finally {
            backend.close();
        }
    }

    private String run() {
        StringBuilder json = new StringBuilder();
        json.append("{\n  \"device\": \"").append(device.name()).append("\",\n");
        json.append("  \"batch\": ").append(batch).append(",\n  \"rounds\": ").append(rounds).append(",\n");
        json.append("  \"spinMillis\": ").append(SPIN_MILLIS).append(",\n");
        json.append("  \"sustainedLaunches\": ").append(SUSTAINED_LAUNCHES).append(",\n");
        json.append("  \"defaultPath\": \"").append(LibCudaLaunch.get().isPresent() ? "ffm" : "jcuda").append("\",\n");
        json.append("  \"results\": [\n");
        List<String> rows = new ArrayList<>();
        Map<String, Double> medians = new LinkedHashMap<>();
        for (KernelFunction kernel : List.of(echo, noop)) {
            int arguments = kernel == echo ? 11 : 0;
            // warm-up: compile the launch paths before anything is timed
            for (int r = 0; r < Math.max(5, rounds / 4); r++) {
                for (String path : PATHS) {
                    enqueueRound(streams.get(path), kernel);
                }
            }
            Map<String, double[]> perPath = new LinkedHashMap<>();
            PATHS.forEach(p -> perPath.put(p, new double[rounds]));
            for (int r = 0; r < rounds; r++) {
                for (int i = 0; i < PATHS.size(); i++) {
                    String path = PATHS.get((r + i) % PATHS.size()); // alternate which path goes first
                    perPath.get(path)[r] = enqueueRound(streams.get(path), kernel);
                }
            }
            for (String path : PATHS) {
                double[] us = perPath.get(path);
                Arrays.sort(us);
                double sustained = sustained(streams.get(path), kernel);
                medians.put(path + "/" + kernel.name(), us[us.length / 2]);
                rows.add(String.format(Locale.ROOT, "    {\"path\": \"%s\", \"kernel\": \"%s\", \"arguments\": %d, "
                                + "\"enqueueUsPerLaunch\": {\"min\": %.3f, \"median\": %.3f, \"p90\": %.3f}, "
                                + "\"sustainedUsPerLaunch\": %.3f}",
                        path, kernel.name(), arguments, us[0], us[us.length / 2], us[(int) (us.length * 0.9)], sustained));
                System.out.printf(Locale.ROOT, "launch-bench %-5s %-14s args=%2d enqueue median %.3f us (min %.3f, p90 %.3f),"
                                + " sustained %.3f us%n", path, kernel.name(), arguments, us[us.length / 2], us[0],
                        us[(int) (us.length * 0.9)], sustained);
            }
        }
        double floor = driverFloor();
        System.out.printf(Locale.ROOT, "launch-bench driver floor (FFM, 11 arguments written once) %.3f us%n", floor);
        json.append(String.join(",\n", rows)).append("\n  ],\n");
        json.append(String.format(Locale.ROOT, "  \"driverFloorUsPerLaunch\": %.3f,\n", floor));
        json.append("  \"enqueueMedianSpeedup\": {");
        List<String> speedups = new ArrayList<>();
        for (KernelFunction kernel : List.of(echo, noop)) {
            double ratio = medians.get("jcuda/" + kernel.name()) / medians.get("ffm/" + kernel.name());
            speedups.add(String.format(Locale.ROOT, "\"%s\": %.3f", kernel.name(), ratio));
            System.out.printf(Locale.ROOT, "launch-bench %s: jcuda/ffm enqueue median = %.3f%n", kernel.name(), ratio);
        }
        json.append(String.join(", ", speedups)).append("}\n}\n");
        for (CudaStream stream : streams.values()) {
            stream.close();
        }
        device.plainChunkSource().free(scratch, 2L << 20);
        return json.toString();
    }

    /** One batch of launches behind a spin kernel; microseconds per launch, host time only. */
    private double enqueueRound(CudaStream stream, KernelFunction kernel) {
        busy(stream);
        long start = System.nanoTime();
        if (kernel == echo) {
            for (int i = 0; i < batch; i++) {
                launchEcho(stream, i);
            }
        } else {
            for (int i = 0; i < batch; i++) {
                stream.launch(noop, 1, 1, 1, 32, 1, 1, 0);
            }
        }
        long elapsed = System.nanoTime() - start;
        stream.synchronize();
        return elapsed / 1e3 / batch;
    }

    /** Launches back to back with the GPU running them, through a synchronize; microseconds per launch. */
    private double sustained(CudaStream stream, KernelFunction kernel) {
        stream.synchronize();
        long start = System.nanoTime();
        for (int i = 0; i < SUSTAINED_LAUNCHES; i++) {
            if (kernel == echo) {
                launchEcho(stream, i);
            } else {
                stream.launch(noop, 1, 1, 1, 32, 1, 1, 0);
            }
        }
        stream.synchronize();
        return (System.nanoTime() - start) / 1e3 / SUSTAINED_LAUNCHES;
    }

    /** echo_arguments with a null output (no work) and arguments that change per launch, as a forward's do. */
    private void launchEcho(CudaStream stream, int i) {
        stream.launch(echo, 1, 1, 1, 32, 1, 1, 0, 0L, 0x7f00_0000_0000L + 256L * i, i, i * 0.5f,
                0x7f10_0000_0000L + 512L * i, 768, 1e-12f, 0x7f20_0000_0000L + 64L * i, 12, 0.125f, i & 1);
    }

    private void busy(CudaStream stream) {
        stream.launch(spin, 1, 1, 1, 32, 1, 1, 0, scratch, 0L, 0, SPIN_MILLIS * CudaTestSupport.CYCLES_PER_MILLI);
    }

    /** The FFM binding alone, arguments written once: the driver's enqueue with no Java work per launch. */
    private double driverFloor() {
        LibCudaLaunch driver = LibCudaLaunch.get().orElseThrow();
        CudaStream stream = streams.get("ffm");
        long function = ((CudaFunction) echo).nativeHandle();
        long handle = stream.nativeHandle();
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment params = arena.allocate(16L * 11, 8);
            for (int i = 0; i < 11; i++) {
                params.set(ADDRESS, 8L * i, MemorySegment.ofAddress(params.address() + 8L * (11 + i)));
            }
            double[] us = new double[rounds];
            for (int r = -Math.max(5, rounds / 4); r < rounds; r++) {
                busy(stream);
                device.makeCurrent();
                long start = System.nanoTime();
                for (int i = 0; i < batch; i++) {
                    Cu.check("cuLaunchKernel", driver.launch(function, 1, 1, 1, 32, 1, 1, 0, handle, params), "floor");
                }
                long elapsed = System.nanoTime() - start;
                stream.synchronize();
                if (r >= 0) {
                    us[r] = elapsed / 1e3 / batch;
                }
            }
            Arrays.sort(us);
            return us[us.length / 2];
        }
    }
}
