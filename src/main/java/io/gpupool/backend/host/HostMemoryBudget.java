package io.gpupool.backend.host;

import io.gpupool.memory.OutOfDeviceMemoryException;

import java.util.concurrent.atomic.AtomicLong;

/**
 * The host device's memory budget, shared by its chunk source and its DIRECT allocator so that the
 * device reports one "free memory" figure. Reservation is a CAS loop on one counter.
 */
final class HostMemoryBudget {

    private final long capacity;
    private final AtomicLong used = new AtomicLong();

    HostMemoryBudget(long capacity) {
        if (capacity <= 0) {
            throw new IllegalArgumentException("host memory budget must be > 0 bytes, got " + capacity);
        }
        this.capacity = capacity;
    }

    long capacity() {
        return capacity;
    }

    long used() {
        return used.get();
    }

    /** Takes {@code bytes} from the budget or throws naming the numbers. */
    void reserve(long bytes, String who) {
        while (true) {
            long current = used.get();
            if (current + bytes > capacity || current + bytes < 0) {
                throw new OutOfDeviceMemoryException(bytes, who + ": cannot reserve " + bytes + " bytes, "
                        + current + " of " + capacity + " bytes of the host budget are in use");
            }
            if (used.compareAndSet(current, current + bytes)) {
                return;
            }
        }
    }

    void release(long bytes) {
        used.addAndGet(-bytes);
    }
}
