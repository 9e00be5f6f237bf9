package io.gpupool.serving;

import io.gpupool.memory.OutOfDeviceMemoryException;
import io.netty.handler.timeout.ReadTimeoutException;
import reactor.netty.channel.AbortedException;

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

    /**
     * The client went away while its request was still arriving (it closed or reset the connection, or
     * stopped sending past {@code gpupool.server.body-read-timeout}, after which the server closes it): no
     * answer can reach it, and nothing is wrong with the server, so it counts as a cancellation.
     */
    static boolean clientWentAway(Throwable failure) {
        return failure instanceof AbortedException || failure instanceof ReadTimeoutException
                || AbortedException.isConnectionReset(failure);
    }
}
