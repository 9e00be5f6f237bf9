package io.gpupool.serving;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.util.List;

/**
 * The devices the server runs on, each with its pool, weights allocator, kernels and stream set.
 * Closing stops the workers (finishing running requests), closes the kernels (which give their workspaces back to
 * the pool), then closes the allocators; a pool that
 * still has blocks out reports them in its exception, which is logged rather than hiding the others.
 */
public record ServingDevices(List<DeviceRuntime> devices) implements AutoCloseable {

    private static final Logger log = LoggerFactory.getLogger(ServingDevices.class);

    public ServingDevices {
        devices = List.copyOf(devices);
        if (devices.isEmpty()) {
            throw new IllegalArgumentException("at least one device is needed");
        }
    }

    @Override
    public void close() {
        for (DeviceRuntime device : devices) {
            closeQuietly("stream workers", device.index(), device.worker());
            if (device.ops() instanceof AutoCloseable kernels) {
                closeQuietly("kernels (their pool workspaces)", device.index(), kernels);
            }
            closeQuietly("activation allocator", device.index(), device.allocator());
            if (device.weightsAllocator() != device.allocator()) {
                closeQuietly("weights allocator", device.index(), device.weightsAllocator());
            }
        }
    }

    private static void closeQuietly(String what, int device, AutoCloseable closeable) {
        try {
            closeable.close();
        } catch (Exception e) {
            log.warn("Closing the {} of device {} failed: {}", what, device, e.getMessage());
        }
    }
}
