package io.gpupool.kernels.cuda;

import io.gpupool.backend.DeviceStream;
import io.gpupool.backend.KernelFunction;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.util.concurrent.atomic.LongAdder;

/**
 * The plumbing every CUDA op of {@link CudaTensorOps} shares: reading the committed PTX, enqueueing a launch and
 * counting it, the grid arithmetic, and the argument checks. One instance per {@link CudaTensorOps}, shared by its
 * parts ({@link GemmKernels}, {@link LibraryGemm}, {@link CudaAttentionOps}, {@link CudaRowOps}), so that
 * {@link #launches()} counts what the whole instance enqueued; the packed-sequence ops ({@link CudaPackedOps})
 * launch on their own and are not counted.
 *
 * <p>Arguments are checked (positive dimensions, non-null required pointers, 16-byte aligned linear operands:
 * the GEMM kernels move float4 vectors; pool and weight blocks are 256-byte aligned) with messages naming the
 * argument; device pointers are trusted to cover the shapes given, and token ids to index the tables.
 */
final class KernelLauncher {

    /** Threads per block of the row-wise kernels. */
    private static final int ROW_BLOCK = 256;
    /** Blocks of the element-wise passes (grid-stride loops: split-K init and activation, conversions). */
    static final int PASS_MAX_BLOCKS = 1024;

    /** Kernel launches and library calls enqueued so far (LongAdder: streams of all requests add to it). */
    private final LongAdder launches = new LongAdder();

    /** Enqueues {@code function} on {@code stream} and counts it. */
    void launch(DeviceStream stream, KernelFunction function, int gridX, int gridY, int gridZ, int blockX,
                int blockY, int blockZ, int sharedMemoryBytes, Object... arguments) {
        stream.launch(function, gridX, gridY, gridZ, blockX, blockY, blockZ, sharedMemoryBytes, arguments);
        launches.increment();
    }

    /** Counts a library call enqueued outside {@link #launch}. */
    void countLibraryCall() {
        launches.increment();
    }

    /** Kernel launches plus library calls counted so far. */
    long launches() {
        return launches.sum();
    }

    /** Reads a committed PTX resource ({@code /ptx/<name>.ptx}). */
    static byte[] ptx(String name) {
        String path = "/ptx/" + name + ".ptx";
        try (InputStream in = KernelLauncher.class.getResourceAsStream(path)) {
            if (in == null) {
                throw new IllegalStateException("PTX resource " + path + " is missing from the classpath "
                        + "(regenerate with tools/build-ptx.sh)");
            }
            return in.readAllBytes();
        } catch (IOException e) {
            throw new UncheckedIOException("cannot read PTX resource " + path, e);
        }
    }

    /** Threads for a row kernel: the row length rounded up to a warp, at most {@link #ROW_BLOCK}. */
    static int rowBlock(int cols) {
        return Math.min(ROW_BLOCK, (cols + 31) / 32 * 32);
    }

    /** Blocks of a 256-thread grid-stride pass over {@code count} elements, at most {@link #PASS_MAX_BLOCKS}. */
    static int passBlocks(long count) {
        return (int) Math.min(PASS_MAX_BLOCKS, ceilDiv(count, 256));
    }

    static int ceilDiv(int a, int b) {
        return (a + b - 1) / b;
    }

    static long ceilDiv(long a, long b) {
        return (a + b - 1) / b;
    }

    static void positive(String name, int value) {
        if (value <= 0) {
            throw new IllegalArgumentException(name + " must be positive, got " + value);
        }
    }

    static void aligned(String name, long address) {
        if ((address & 15) != 0) {
            throw new IllegalArgumentException(name + " must be 16-byte aligned, got 0x" + Long.toHexString(address));
        }
    }

    static void pointer(String name, long address) {
        if (address == 0) {
            throw new IllegalArgumentException(name + " must be a device address, got 0");
        }
    }

    /** LayerNorm's {@code eps}: positive (NaN is not). */
    static void positiveEps(float eps) {
        if (!(eps > 0)) {
            throw new IllegalArgumentException("eps must be positive, got " + eps);
        }
    }
}
