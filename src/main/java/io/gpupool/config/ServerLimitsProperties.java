package io.gpupool.config;

import java.time.Duration;

import org.springframework.util.unit.DataSize;

import org.springframework.boot.context.properties.ConfigurationProperties;
import org.springframework.boot.context.properties.bind.DefaultValue;

/**
 * Connection limits of both HTTP servers ({@code gpupool.server.*}): what a client may hold open and for
 * how long, so that idle, slow or numerous connections cannot starve the others (health probes
 * included). Defaults are those of a common reverse proxy's; validated once at start.
 *
 * @param idleTimeout              a kept-alive connection with no request in progress is closed after this
 * @param requestHeaderTimeout     the request line and headers must arrive within this from their first
 *                                 byte, else 408 and close (a client trickling header bytes is not idle)
 * @param bodyReadTimeout          longest pause between two reads of a request body, else 408 naming it
 *                                 and close
 * @param requestTimeout           the whole request body must arrive within this from its headers, else 408
 *                                 naming it and close
 * @param maxConnections           connections the application port (inference API) holds at once; one
 *                                 more is answered 503 and closed
 * @param managementMaxConnections the same for the management port (actuator), counted separately so
 *                                 that a flood on the API leaves probes and metrics reachable (when the
 *                                 actuator has a port of its own, {@code management.server.port})
 * @param maxDecodingBytes         bytes of inference request bodies read and decoded at once (a body is
 *                                 counted at its declared length, else by what has arrived, and at its inflated
 *                                 size when compressed: {@link io.gpupool.serving.DecodingBudget});
 *                                 a request beyond it is answered 503 with Retry-After; at least
 *                                 {@code max-body-size}. Decoding holds a few times these bytes of heap
 */
@ConfigurationProperties("gpupool.server")
public record ServerLimitsProperties(@DefaultValue("60s") Duration idleTimeout,
                                     @DefaultValue("20s") Duration requestHeaderTimeout,
                                     @DefaultValue("30s") Duration bodyReadTimeout,
                                     @DefaultValue("120s") Duration requestTimeout,
                                     @DefaultValue("512") int maxConnections,
                                     @DefaultValue("64") int managementMaxConnections,
                                     @DefaultValue("256MB") DataSize maxDecodingBytes) {

    public ServerLimitsProperties {
        requireDuration("idle-timeout", idleTimeout);
        requireDuration("request-header-timeout", requestHeaderTimeout);
        requireDuration("body-read-timeout", bodyReadTimeout);
        requireDuration("request-timeout", requestTimeout);
        requireCount("max-connections", maxConnections);
        requireCount("management-max-connections", managementMaxConnections);
        if (maxDecodingBytes == null || maxDecodingBytes.toBytes() < 1024) {
            throw new IllegalArgumentException("gpupool.server.max-decoding-bytes = " + maxDecodingBytes
                    + " is invalid; allowed: at least gpupool.serving.max-body-size");
        }
    }

    private static void requireDuration(String property, Duration value) {
        if (value == null || value.compareTo(Duration.ofMillis(100)) < 0 || value.compareTo(Duration.ofHours(1)) > 0) {
            throw new IllegalArgumentException("gpupool.server." + property + " = " + value
                    + " is invalid; allowed: [100ms, 1h]");
        }
    }

    private static void requireCount(String property, int value) {
        if (value < 1 || value > 1_000_000) {
            throw new IllegalArgumentException("gpupool.server." + property + " = " + value
                    + " is invalid; allowed: [1, 1000000]");
        }
    }
}
