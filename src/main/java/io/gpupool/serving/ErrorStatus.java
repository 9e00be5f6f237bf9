package io.gpupool.serving;

import io.gpupool.memory.OutOfDeviceMemoryException;

/** The HTTP status a failure is answered with; the single place that decides it. */
final class ErrorStatus {

    private ErrorStatus() {
    }

    /**
     * {@link ServingException}: its own status (400, 404, 413, 503, 504); {@link OutOfDeviceMemoryException}:
     * 507, because the pool already ran its staged recovery before throwing; anything else: 500.
     */
    static int of(Throwable failure) {
        return switch (failure) {
            case ServingException serving -> serving.status();
            case OutOfDeviceMemoryException ignored -> 507;
            default -> 500;
        };
    }
}
