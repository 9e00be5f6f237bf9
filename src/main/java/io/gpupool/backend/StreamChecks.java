package io.gpupool.backend;

import java.lang.foreign.MemorySegment;
import java.util.Objects;

/**
 * What every {@link DeviceStream} checks: its arguments before it enqueues a copy or a fill, so that a
 * bad size fails on the caller's thread with a message rather than later on the device; and, at
 * {@code synchronize} or {@code close}, the first failure of the work it ran, rethrown to the caller.
 */
public final class StreamChecks {

    private StreamChecks() {
    }

    /** @throws IllegalArgumentException when {@code bytes} is negative */
    public static void checkBytes(long bytes) {
        if (bytes < 0) {
            throw new IllegalArgumentException("bytes must be >= 0, got " + bytes);
        }
    }

    /** @throws IllegalArgumentException when {@code bytes} is negative or more than {@code host} holds */
    public static void checkCopy(MemorySegment host, long bytes) {
        checkBytes(bytes);
        Objects.requireNonNull(host, "host segment");
        if (host.byteSize() < bytes) {
            throw new IllegalArgumentException("host segment holds " + host.byteSize() + " bytes, copy needs " + bytes);
        }
    }

    /**
     * Rethrows {@code failure} (nothing for null): unchecked exceptions and errors as they are, anything
     * else wrapped with {@code what}, e.g. "work on a host stream".
     */
    public static void rethrow(Throwable failure, String what) {
        if (failure == null) {
            return;
        }
        if (failure instanceof RuntimeException runtime) {
            throw runtime;
        }
        if (failure instanceof Error error) {
            throw error;
        }
        throw new IllegalStateException(what + " failed", failure);
    }
}
