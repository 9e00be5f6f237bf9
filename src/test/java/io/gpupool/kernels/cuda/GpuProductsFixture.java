package io.gpupool.kernels.cuda;

import io.gpupool.backend.ComputeDevice;
import io.gpupool.backend.DeviceStream;
import io.gpupool.backend.MatmulLibrary;
import io.gpupool.backend.cuda.CudaBackend;
import io.gpupool.memory.PoolConfig;
import io.gpupool.memory.pool.DevicePool;
import io.gpupool.model.Bf16;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.SplittableRandom;

import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

/**
 * What every GPU test of the kernels' products needs around its assertions, so that the tests themselves hold only
 * inputs, references and tolerances.
 *
 * <ul>
 *   <li>The CUDA backend, opened once per test class. Where no driver or device answers the class is skipped, not
 *       failed (subclasses also carry {@code @Tag("gpu")}, which the build excludes by default), so a machine
 *       without a GPU passes. {@link #cublasLt()} is the opposite on purpose: a GPU machine without the library
 *       fails, because the server would silently run slower there.</li>
 *   <li>Per test: the default stream (and any further {@link #newStream(int)}), a shared host arena (the stream's
 *       worker thread copies into and out of it), and, for tests of pooled workspaces, a {@link DevicePool}.</li>
 *   <li>Inputs and outputs go through device memory taken straight from the chunk source (not the pool, so the
 *       pool's metrics count only what the ops took) and all given back after the test.</li>
 *   <li>Seeded randoms, so a failure repeats, and the one closeness check, whose message names the worst element.</li>
 * </ul>
 *
 * Teardown order: 1. every stream drains, so nothing in flight reads or writes what is freed next; 2. the ops the
 * test {@linkplain #opened opened} close and give their workspaces back; 3. the device blocks are freed; 4. the
 * streams close, then the pool, then the arena.
 */
abstract class GpuProductsFixture {

    /** For {@link #GpuProductsFixture(long, boolean)}: the test opens ops on pooled workspaces. */
    protected static final boolean WITH_POOL = true;
    /** For {@link #GpuProductsFixture(long, boolean)}: the test needs no pool. */
    protected static final boolean WITHOUT_POOL = false;

    private static CudaBackend backend;
    protected static ComputeDevice device;

    /** The seeded source of {@link #randoms(int, float)}; tests may draw from it too (ids, seeds). */
    protected final SplittableRandom random;
    /** Ops the test opened; closed after the streams drained. A test may close and clear them itself first. */
    protected final List<CudaTensorOps> opened = new ArrayList<>();
    private final boolean withPool;
    private final List<long[]> allocations = new ArrayList<>();
    private final List<DeviceStream> streams = new ArrayList<>();
    protected DeviceStream stream;
    protected Arena arena;
    /** The pool workspaces come from; {@code null} for a fixture made {@link #WITHOUT_POOL}. */
    protected DevicePool pool;

    protected GpuProductsFixture(long seed, boolean withPool) {
        this.random = new SplittableRandom(seed);
        this.withPool = withPool;
    }

    @BeforeAll
    static void openBackend() {
        Optional<CudaBackend> created = CudaBackend.tryCreate();
        assumeTrue(created.isPresent(), "no CUDA driver or device");
        backend = created.get();
        device = backend.devices().getFirst();
    }

    @AfterAll
    static void closeBackend() {
        if (backend != null) {
            backend.close();
            backend = null;
            device = null;
        }
    }

    /** cuBLASLt from {@code -Dgpupool.kernels.cublas-lt-dir} when set, else the usual search; fails when absent. */
    protected static MatmulLibrary cublasLt() {
        String dir = System.getProperty("gpupool.kernels.cublas-lt-dir");
        return device.matmulLibrary(dir == null ? null : Path.of(dir)).orElseThrow(() ->
                new AssertionError("cuBLASLt could not be loaded on this GPU machine (see the log)"));
    }

    @BeforeEach
    void openFixture() {
        device.bindToCurrentThread();
        stream = newStream(0);
        arena = Arena.ofShared();
        if (withPool) {
            pool = new DevicePool(device.chunkSource(), PoolConfig.defaults());
        }
    }

    @AfterEach
    void releaseFixture() {
        streams.forEach(DeviceStream::synchronize);
        opened.forEach(CudaTensorOps::close);
        for (long[] block : allocations) {
            device.chunkSource().free(block[0], block[1]);
        }
        streams.forEach(DeviceStream::close);
        if (pool != null) {
            pool.close();
        }
        arena.close();
    }

    /** A further stream of the device, drained and closed with the default one after the test. */
    protected DeviceStream newStream(int ordinal) {
        DeviceStream created = device.createStream(ordinal);
        streams.add(created);
        return created;
    }

    /** Remembers {@code ops} so that it closes after the test. */
    protected CudaTensorOps opened(CudaTensorOps ops) {
        opened.add(ops);
        return ops;
    }

    protected static void assertClose(String what, float[] got, double[] expected, double tolerance) {
        double worst = 0;
        int worstIndex = -1;
        for (int i = 0; i < expected.length; i++) {
            double error = Math.abs(got[i] - expected[i]);
            if (!(error <= worst)) {      // also catches NaN (an element the kernel never wrote)
                worst = Double.isNaN(error) ? Double.POSITIVE_INFINITY : error;
                worstIndex = i;
            }
        }
        double finalWorst = worst;
        int index = worstIndex;
        assertTrue(worst <= tolerance, () -> what + ": max abs error " + finalWorst + " at " + index + " (got "
                + got[index] + ", expected " + expected[index] + "), tolerance " + tolerance);
    }

    /** erf by its Maclaurin series (|x| < 3) or the continued-fraction tail; far below float rounding. */
    protected static double erf(double x) {
        double ax = Math.abs(x);
        if (ax < 3) {
            double term = ax;
            double sum = ax;
            for (int n = 1; n < 200 && Math.abs(term) > 1e-17; n++) {
                term *= -ax * ax / n;
                sum += term / (2 * n + 1);
            }
            return Math.copySign(2 / Math.sqrt(Math.PI) * sum, x);
        }
        double fraction = 0;
        for (int n = 60; n >= 1; n--) {
            fraction = n / 2.0 / (ax + fraction);
        }
        double tail = Math.exp(-ax * ax) / Math.sqrt(Math.PI) / (ax + fraction);
        return Math.copySign(1 - tail, x);
    }

    /** {@code v} rounded to bf16 and back, as a bf16-resident kernel sees it. */
    protected static double bf(float v) {
        return Bf16.toFloat(Bf16.fromFloat(v));
    }

    /** {@code n} values uniform in [-scale, scale) from the fixture's seeded source. */
    protected float[] randoms(int n, float scale) {
        return randoms(random, n, scale);
    }

    protected static float[] randoms(SplittableRandom random, int n, float scale) {
        float[] values = new float[n];
        for (int i = 0; i < n; i++) {
            values[i] = (float) ((random.nextDouble() * 2 - 1) * scale);
        }
        return values;
    }

    /** Device memory from the chunk source, freed after the test. */
    protected long allocate(long bytes) {
        long address = device.chunkSource().allocate(bytes);
        allocations.add(new long[] {address, bytes});
        return address;
    }

    protected long upload(float[] values) {
        return toDevice(arena.allocateFrom(ValueLayout.JAVA_FLOAT, values));
    }

    /** {@code values} rounded to bf16 on the host, then copied to the device. */
    protected long uploadBf16(float[] values) {
        MemorySegment host = arena.allocate((long) values.length * 2, 16);
        for (int i = 0; i < values.length; i++) {
            host.setAtIndex(ValueLayout.JAVA_SHORT, i, Bf16.fromFloat(values[i]));
        }
        return toDevice(host);
    }

    protected long uploadInts(int[] values) {
        return toDevice(arena.allocateFrom(ValueLayout.JAVA_INT, values));
    }

    /** A device copy of {@code host}, queued on the default stream. */
    private long toDevice(MemorySegment host) {
        long address = allocate(host.byteSize());
        stream.copyHostToDevice(host, address, host.byteSize());
        return address;
    }

    /** Reads {@code count} floats after everything the default stream queued before. */
    protected float[] download(long address, int count) {
        MemorySegment host = arena.allocate((long) count * Float.BYTES, 16);
        stream.copyDeviceToHost(address, host, host.byteSize());
        stream.synchronize();
        return host.toArray(ValueLayout.JAVA_FLOAT);
    }

    /** Reads {@code count} activations (FP32 or bf16, as {@code ops} holds them) as floats. */
    protected float[] widen(CudaTensorOps ops, long address, int count) {
        long wide = ops.activationBytes() == 2 ? allocate((long) count * Float.BYTES) : address;
        if (wide != address) {
            ops.toFloat32(stream, address, wide, count);
        }
        return download(wide, count);
    }
}
