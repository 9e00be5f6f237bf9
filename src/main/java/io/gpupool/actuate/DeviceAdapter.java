package io.gpupool.actuate;

import java.util.Objects;
import java.util.Optional;

import org.jspecify.annotations.Nullable;

/**
 * What every {@link ManagedPool} adapter knows of its device whatever allocator it wraps: the selector,
 * the device's memory and the trace recorder in front of the allocator, if any.
 */
abstract class DeviceAdapter implements ManagedPool {

    private final String device;
    private final long capacityBytes;
    private final @Nullable TraceControl trace;

    /**
     * @param device        the selector, e.g. {@code cuda:0}
     * @param capacityBytes memory of the device (what a fractional cap applies to)
     * @param trace         trace recording of the allocator, or null
     */
    DeviceAdapter(String device, long capacityBytes, @Nullable TraceControl trace) {
        this.device = Objects.requireNonNull(device, "device");
        this.capacityBytes = capacityBytes;
        this.trace = trace;
    }

    @Override
    public final String device() {
        return device;
    }

    @Override
    public final long capacityBytes() {
        return capacityBytes;
    }

    @Override
    public final Optional<TraceControl> trace() {
        return Optional.ofNullable(trace);
    }
}
