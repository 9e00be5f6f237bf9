package io.gpupool.memory;

/**
 * Thrown when device memory cannot be provided, by a {@link ChunkSource} (the device or a limit
 * refused) or by the pool after its staged recovery failed. The message states the numbers an
 * operator needs: requested, reserved, allocated, cached, largest free block, fragmentation.
 */
public class OutOfDeviceMemoryException extends RuntimeException {

    private final long requestedBytes;

    public OutOfDeviceMemoryException(long requestedBytes, String message) {
        super(message);
        this.requestedBytes = requestedBytes;
    }

    public OutOfDeviceMemoryException(long requestedBytes, String message, Throwable cause) {
        super(message, cause);
        this.requestedBytes = requestedBytes;
    }

    /** The size of the request that failed, in bytes. */
    public long requestedBytes() {
        return requestedBytes;
    }
}
