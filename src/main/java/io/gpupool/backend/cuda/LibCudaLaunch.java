package io.gpupool.backend.cuda;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.invoke.MethodHandle;
import java.util.Optional;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * An FFM binding to the driver's {@code cuLaunchKernel} in {@code libcuda.so.1}, the library {@link LibCuda} and
 * JCuda use, so a launch made here runs in the context JCuda made current:
 * <pre>
 *   CUresult cuLaunchKernel(CUfunction f,                                  long
 *                           unsigned gridDimX, gridDimY, gridDimZ,        int x 3
 *                           unsigned blockDimX, blockDimY, blockDimZ,     int x 3
 *                           unsigned sharedMemBytes,                      int
 *                           CUstream hStream,                             long
 *                           void **kernelParams,                          segment (pointer array)
 *                           void **extra)                                 long 0
 * </pre>
 * The handles travel as {@code long}s, as in {@link LibCublasLt}. The parameter array travels as a segment so that
 * the linker keeps its memory alive for the duration of the call. The driver copies the parameter values during
 * the call (for a launch and for a launch being captured into a graph alike), so the caller may overwrite them as
 * soon as it returns. The handle is an ordinary downcall, not a critical one: {@code cuLaunchKernel} blocks while the
 * stream's queue is full, and a critical call would hold up every safepoint of the JVM for that long.
 *
 * <p>The binding is made once per process ({@link #get}); where it cannot be made (no libcuda, no such symbol,
 * native access denied to this module) {@link #get} is empty and one log line says why, and streams launch through
 * JCuda instead ({@link KernelLauncher#forStream}).
 */
final class LibCudaLaunch implements FfmKernelLauncher.Driver {

    private static final System.Logger LOG = System.getLogger(LibCudaLaunch.class.getName());

    private final MethodHandle launchKernel;

    private LibCudaLaunch(MethodHandle launchKernel) {
        this.launchKernel = launchKernel;
    }

    /** The binding, or empty (logged once) where it cannot be made. */
    static Optional<LibCudaLaunch> get() {
        return Holder.BINDING;
    }

    /** Binds lazily, on the first stream's creation: a process without CUDA streams never looks for libcuda. */
    private static final class Holder {
        static final Optional<LibCudaLaunch> BINDING = bind();
    }

    private static Optional<LibCudaLaunch> bind() {
        try {
            SymbolLookup lib = SymbolLookup.libraryLookup("libcuda.so.1", Arena.global());
            MemorySegment symbol = lib.find("cuLaunchKernel").orElseThrow(
                    () -> new IllegalStateException("libcuda.so.1 has no symbol cuLaunchKernel"));
            MethodHandle handle = Linker.nativeLinker().downcallHandle(symbol, FunctionDescriptor.of(JAVA_INT,
                    JAVA_LONG, JAVA_INT, JAVA_INT, JAVA_INT, JAVA_INT, JAVA_INT, JAVA_INT, JAVA_INT, JAVA_LONG,
                    ADDRESS, JAVA_LONG));
            return Optional.of(new LibCudaLaunch(handle));
        } catch (RuntimeException | LinkageError e) {
            LOG.log(System.Logger.Level.WARNING, "Kernel launches go through JCuda: cuLaunchKernel could not be bound "
                    + "through FFM ({0})", e.toString());
            return Optional.empty();
        }
    }

    @Override
    public int launch(long function, int gridX, int gridY, int gridZ, int blockX, int blockY, int blockZ,
                      int sharedMemoryBytes, long stream, MemorySegment kernelParams) {
        try {
            return (int) launchKernel.invokeExact(function, gridX, gridY, gridZ, blockX, blockY, blockZ,
                    sharedMemoryBytes, stream, kernelParams, 0L);
        } catch (RuntimeException | Error e) {
            throw e;
        } catch (Throwable t) {
            throw new IllegalStateException(t);
        }
    }
}
