package io.gpupool.backend.cuda;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

import static java.lang.foreign.ValueLayout.JAVA_FLOAT;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * One stream's native parameter block for kernel launches through FFM ({@link LibCuda#launchKernel}), allocated once
 * so that a launch allocates nothing:
 * <pre>
 *   values    [MAX x 8 bytes]   argument i at 8·i: a Long as 8 bytes, an Integer or Float in the low 4
 *   pointers  [MAX x 8 bytes]   pointers[i] = &amp;values[i], written once: the kernelParams array cuLaunchKernel reads
 * </pre>
 * The driver copies the argument values when the launch is enqueued (and into the node when a graph captures it),
 * so the next launch may overwrite the block at once. The JCuda path builds a pointer object per argument and per
 * launch instead; this is the cheaper enqueue for the many small kernels of a forward. Used under the stream's lock
 * ({@link CudaStream#launch} holds it), since a stream's launches may come from different threads one at a time.
 */
final class KernelArguments implements AutoCloseable {

    /** Arguments per launch at most (the widest kernel takes 12). */
    static final int MAX = 32;

    private final Arena arena = Arena.ofShared();
    private final MemorySegment values = arena.allocate(8L * MAX, 16);
    private final MemorySegment pointers = arena.allocate(8L * MAX, 16);

    KernelArguments() {
        for (int i = 0; i < MAX; i++) {
            pointers.setAtIndex(JAVA_LONG, i, values.address() + 8L * i);
        }
    }

    /** Writes {@code arguments} (Long, Integer or Float each) and returns the kernelParams address. */
    long fill(String kernel, Object[] arguments) {
        if (arguments.length > MAX) {
            throw new IllegalArgumentException(kernel + " takes " + arguments.length + " arguments; at most " + MAX);
        }
        for (int i = 0; i < arguments.length; i++) {
            long offset = 8L * i;
            switch (arguments[i]) {
                case Long value -> values.set(JAVA_LONG, offset, value);
                case Integer value -> values.set(JAVA_INT, offset, value);
                case Float value -> values.set(JAVA_FLOAT, offset, value);
                case null -> throw new IllegalArgumentException("argument " + i + " of " + kernel + " is null");
                default -> throw new IllegalArgumentException("argument " + i + " of " + kernel + " is a "
                        + arguments[i].getClass().getSimpleName() + "; kernels take Long, Integer or Float");
            }
        }
        return pointers.address();
    }

    @Override
    public void close() {
        arena.close();
    }
}
