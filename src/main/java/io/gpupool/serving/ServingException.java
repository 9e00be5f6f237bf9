package io.gpupool.serving;

import java.time.Duration;

/**
 * A request the server refuses or cannot finish, with the HTTP status it answers with. The message
 * is returned to the client as {@code {"error": message}}, so it names the problem and the value.
 */
public final class ServingException extends RuntimeException {

    private final int status;
    /** Seconds for a Retry-After header, or 0 for none. */
    private final long retryAfterSeconds;
    /** Methods for an Allow header (405), or null. */
    private final String allow;

    private ServingException(int status, String message, long retryAfterSeconds) {
        this(status, message, retryAfterSeconds, null);
    }

    private ServingException(int status, String message, long retryAfterSeconds, String allow) {
        super(message, null, false, false);
        this.status = status;
        this.retryAfterSeconds = retryAfterSeconds;
        this.allow = allow;
    }

    /** 405: the path exists but not for this method; {@code allowed} goes to the Allow header. */
    public static ServingException methodNotAllowed(String method, String path, String allowed) {
        return new ServingException(405, "method " + method + " is not allowed on " + path + "; allowed: " + allowed,
                0, allowed);
    }

    /** 400: the request is malformed or violates the model's declared inputs or the server's limits. */
    public static ServingException badRequest(String message) {
        return new ServingException(400, message, 0);
    }

    /** 404: no such model, version or route. */
    public static ServingException notFound(String message) {
        return new ServingException(404, message, 0);
    }

    /** 413: the body exceeds {@code gpupool.serving.max-body-size}. */
    public static ServingException payloadTooLarge(long limitBytes) {
        return new ServingException(413, "request body exceeds the limit of " + limitBytes
                + " bytes (gpupool.serving.max-body-size)", 0);
    }

    /** 413: {@code what} (e.g. the decompressed body) exceeds {@code gpupool.serving.max-body-size}. */
    public static ServingException payloadTooLarge(long limitBytes, String what) {
        return new ServingException(413, what + " exceeds the limit of " + limitBytes
                + " bytes (gpupool.serving.max-body-size)", 0);
    }

    /** 415: the body is in an encoding or format the endpoint does not take. */
    public static ServingException unsupportedMediaType(String message) {
        return new ServingException(415, message, 0);
    }

    /** 403: the call is switched off by the server's configuration. */
    public static ServingException forbidden(String message) {
        return new ServingException(403, message, 0);
    }

    /** 503 with Retry-After: the device queues are full, or the server is not ready yet. */
    public static ServingException unavailable(String message, long retryAfterSeconds) {
        return new ServingException(503, message, retryAfterSeconds);
    }

    /** 503 with Retry-After: {@code model} takes no new request, an unload of it has begun. */
    public static ServingException beingUnloaded(String model) {
        return unavailable("model '" + model + "' is being unloaded", 1);
    }

    /** 504: the request did not finish within its timeout. */
    public static ServingException timedOut(Duration timeout) {
        return new ServingException(504, "inference did not finish within its timeout of "
                + timeout.toNanos() / 1_000 + " µs", 0);
    }

    public int status() {
        return status;
    }

    public long retryAfterSeconds() {
        return retryAfterSeconds;
    }

    /** The Allow header of a 405, or null. */
    public String allow() {
        return allow;
    }
}
