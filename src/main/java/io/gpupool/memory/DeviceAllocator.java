package io.gpupool.memory;

import io.gpupool.memory.metric.AllocatorMode;
import io.gpupool.memory.metric.AllocatorMetrics;

import java.util.Optional;

/**
 * What the rest of the server allocates device memory from: the two-level pool, its variants, or a
 * baseline allocator ({@code direct}, {@code cuda-async}) kept for side-by-side measurement.
 *
 * <p>Every block is handed out with a reference count of one and belongs to the stream that asked
 * for it; {@link DeviceBlock#release()} at zero returns it to this allocator.
 *
 * <p>What an allocator offers beyond allocating (a pool's {@code reserve} and {@code maintain}, a trace
 * recorder's control) is found with {@link #capability}, through any decorators, so wiring code never
 * unwraps them by class.
 */
public interface DeviceAllocator extends AutoCloseable {

    /**
     * Allocates at least {@code bytes} (256-byte aligned) for work on {@code stream}.
     *
     * @throws IllegalArgumentException if {@code bytes} is not positive
     * @throws OutOfDeviceMemoryException if the memory cannot be provided after recovery
     */
    DeviceBlock allocate(long bytes, AllocationStream stream);

    /**
     * Allocates a request arena: one block that holds every intermediate tensor of one forward on
     * {@code stream} and is freed once, after the stream was synchronised; its size changes from request
     * to request. An allocator that keeps blocks per stream may round it up to a block it can reuse for
     * arenas of other sizes; by default it is an ordinary allocation.
     *
     * @throws IllegalArgumentException if {@code bytes} is not positive
     * @throws OutOfDeviceMemoryException if the memory cannot be provided after recovery
     */
    default DeviceBlock allocateArena(long bytes, AllocationStream stream) {
        return allocate(bytes, stream);
    }

    /** Which strategy this allocator implements. */
    AllocatorMode mode();

    /**
     * Read-only statistics, readable at any time without taking an allocation lock. Allocators
     * without levels can use {@link io.gpupool.memory.metric.BasicAllocatorMetrics}.
     */
    AllocatorMetrics metrics();

    /**
     * This allocator as {@code type}, or the first allocator of that type behind it: a decorator
     * answers for itself and then asks the allocator it wraps.
     */
    default <T> Optional<T> capability(Class<T> type) {
        return type.isInstance(this) ? Optional.of(type.cast(this)) : Optional.empty();
    }

    /**
     * Closes the allocator and returns all memory to its source. Blocks still outstanding are
     * reported in the exception message (size, stream, allocation site when tracking is on).
     */
    @Override
    void close();
}
