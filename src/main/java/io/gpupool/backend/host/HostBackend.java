package io.gpupool.backend.host;

import io.gpupool.backend.ComputeBackend;
import io.gpupool.backend.ComputeDevice;

import java.lang.management.ManagementFactory;
import java.util.List;

/**
 * The backend that runs everywhere: one device named "host" whose "device memory" is off-heap
 * memory (FFM) within a budget, and whose streams are worker threads. It is the default where no
 * CUDA device is found.
 */
public final class HostBackend implements ComputeBackend {

    private static final long EIGHT_GIB = 8L << 30;

    private final HostDevice device;

    /** A host backend with the default budget: min(8 GiB, physical memory / 2). */
    public HostBackend() {
        this(defaultBudget());
    }

    /** A host backend whose device has {@code budgetBytes} of memory. */
    public HostBackend(long budgetBytes) {
        this.device = new HostDevice(budgetBytes);
    }

    /** min(8 GiB, physical memory / 2); 8 GiB where the physical size cannot be read. */
    public static long defaultBudget() {
        if (ManagementFactory.getOperatingSystemMXBean() instanceof com.sun.management.OperatingSystemMXBean os) {
            long physical = os.getTotalMemorySize();
            if (physical > 0) {
                return Math.min(EIGHT_GIB, physical / 2);
            }
        }
        return EIGHT_GIB;
    }

    @Override
    public String name() {
        return "host";
    }

    @Override
    public List<ComputeDevice> devices() {
        return List.of(device);
    }

    @Override
    public void close() {
        // streams and chunks are closed by their owners; the budget holds nothing native
    }
}
