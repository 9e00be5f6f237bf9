package io.gpupool.backend.cuda;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_FLOAT;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * Launches through the FFM binding of {@code cuLaunchKernel} ({@link LibCudaLaunch}) with the arguments written
 * into a native buffer the stream owns, allocated once, so a launch allocates nothing and walks no objects.
 *
 * <h2>The buffer</h2>
 * <pre>
 *   offset 0                     8·SLOTS                         16·SLOTS
 *   ├── pointers[0 .. SLOTS) ────┼── slots[0 .. SLOTS) ──────────┤
 *       pointers[i] = &amp;slots[i]      8 bytes each: a Long fills one, an Integer or Float its first 4 bytes
 *       (written once, at creation)
 * </pre>
 * {@code cuLaunchKernel} gets {@code pointers} as {@code kernelParams} and reads, for the kernel's parameter i, as
 * many bytes at {@code pointers[i]} as that parameter has (the PTX declares each size), copying them before it
 * returns; so every slot can be rewritten by the next launch and the pointer array never changes.
 *
 * <h2>A launch</h2>
 * <ol>
 *   <li>Claim the buffer with one compare-and-set. A stream is leased to one user at a time, so the claim only
 *       fails when a caller breaks that rule (two threads launching on one stream at once); the launch then
 *       marshals into a buffer of its own, as it also does for a kernel with more than {@code SLOTS} arguments:
 *       slower, never wrong.</li>
 *   <li>Write argument i into slot i.</li>
 *   <li>Call the driver with {@code pointers}.</li>
 *   <li>Release the buffer (a release store: the next holder's writes come after this driver call).</li>
 * </ol>
 * The buffer comes from an automatic arena: it is host memory of one stream, and the stream gives no point after
 * which a racing launch could not still be using it; the linker keeps it alive for the duration of each call.
 */
final class FfmKernelLauncher implements KernelLauncher {

    /** Arguments the stream's own buffer holds; our kernels take at most a dozen and a half. */
    static final int SLOTS = 64;
    private static final long SLOT_BYTES = 8;
    private static final VarHandle CLAIMED;

    static {
        try {
            CLAIMED = MethodHandles.lookup().findVarHandle(FfmKernelLauncher.class, "claimed", boolean.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    /** The driver call, an interface so that tests can check the marshalling without a GPU. */
    @FunctionalInterface
    interface Driver {
        /** {@code cuLaunchKernel} with no {@code extra}; returns the CUresult. */
        int launch(long function, int gridX, int gridY, int gridZ, int blockX, int blockY, int blockZ,
                   int sharedMemoryBytes, long stream, MemorySegment kernelParams);
    }

    private final Driver driver;
    private final long stream;
    private final int slots;
    private final MemorySegment buffer;
    /** Whether a launch is using {@link #buffer}; accessed through {@link #CLAIMED} only. */
    @SuppressWarnings("unused")
    private volatile boolean claimed;

    FfmKernelLauncher(Driver driver, long stream) {
        this(driver, stream, SLOTS);
    }

    /** {@code slots} other than {@link #SLOTS}: tests of the path for kernels with more arguments. */
    FfmKernelLauncher(Driver driver, long stream, int slots) {
        if (slots < 1) {
            throw new IllegalArgumentException("slots must be >= 1, got " + slots);
        }
        this.driver = driver;
        this.stream = stream;
        this.slots = slots;
        this.buffer = pointedBuffer(Arena.ofAuto(), slots);
    }

    @Override
    public int launch(CudaFunction kernel, int gridX, int gridY, int gridZ, int blockX, int blockY, int blockZ,
                      int sharedMemoryBytes, Object[] arguments) {
        if (arguments.length > slots || !CLAIMED.compareAndSet(this, false, true)) {
            return launchWithOwnBuffer(kernel, gridX, gridY, gridZ, blockX, blockY, blockZ, sharedMemoryBytes,
                    arguments);
        }
        try {
            write(buffer, slots, kernel, arguments);
            return driver.launch(kernel.nativeHandle(), gridX, gridY, gridZ, blockX, blockY, blockZ,
                    sharedMemoryBytes, stream, buffer);
        } finally {
            CLAIMED.setRelease(this, false);
        }
    }

    @Override
    public String path() {
        return "ffm";
    }

    private int launchWithOwnBuffer(CudaFunction kernel, int gridX, int gridY, int gridZ, int blockX, int blockY,
                                    int blockZ, int sharedMemoryBytes, Object[] arguments) {
        try (Arena arena = Arena.ofConfined()) {
            int count = Math.max(1, arguments.length);
            MemorySegment own = pointedBuffer(arena, count);
            write(own, count, kernel, arguments);
            return driver.launch(kernel.nativeHandle(), gridX, gridY, gridZ, blockX, blockY, blockZ,
                    sharedMemoryBytes, stream, own);
        }
    }

    /** A buffer of {@code slots} pointers followed by the {@code slots} slots they point to. */
    private static MemorySegment pointedBuffer(Arena arena, int slots) {
        MemorySegment segment = arena.allocate(2 * SLOT_BYTES * slots, SLOT_BYTES);
        long values = segment.address() + SLOT_BYTES * slots;
        for (int i = 0; i < slots; i++) {
            segment.set(ADDRESS, SLOT_BYTES * i, MemorySegment.ofAddress(values + SLOT_BYTES * i));
        }
        return segment;
    }

    private static void write(MemorySegment buffer, int slots, CudaFunction kernel, Object[] arguments) {
        long offset = SLOT_BYTES * slots;
        for (int i = 0; i < arguments.length; i++, offset += SLOT_BYTES) {
            Object argument = arguments[i];
            if (argument instanceof Long value) {
                buffer.set(JAVA_LONG, offset, value);
            } else if (argument instanceof Integer value) {
                buffer.set(JAVA_INT, offset, value);
            } else if (argument instanceof Float value) {
                buffer.set(JAVA_FLOAT, offset, value);
            } else {
                throw KernelLauncher.invalidArgument(kernel.name(), i, argument);
            }
        }
    }
}
