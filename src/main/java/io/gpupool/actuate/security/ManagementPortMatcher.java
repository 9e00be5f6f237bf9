package io.gpupool.actuate.security;

import java.net.InetSocketAddress;

import org.springframework.boot.actuate.autoconfigure.web.server.ManagementPortType;
import org.springframework.core.env.Environment;
import org.springframework.security.web.server.util.matcher.ServerWebExchangeMatcher;
import org.springframework.web.server.ServerWebExchange;
import reactor.core.publisher.Mono;

/**
 * Requests that arrived on a separate management port ({@code local.management.port}, set once that
 * server started). Never matches when the actuator shares the application port. Both security chains use
 * it: the inference API's chain does not apply there, and the operations chain denies what is not an
 * endpoint.
 *
 * <p>It runs on every request, so the ports are looked up in the environment (a walk over all property
 * sources with conversion) only until both servers have published theirs; from then on the answer is a
 * comparison of two ints. Whether there is a separate port at all is known from the configuration.
 */
public final class ManagementPortMatcher implements ServerWebExchangeMatcher {

    /** {@link #managementPort}: not known yet (the servers are still starting). */
    private static final int UNKNOWN = 0;
    /** {@link #managementPort}: the management server listens on the application port after all. */
    private static final int SHARED = -1;

    // a Mono.just is immutable and can be answered to any number of subscribers
    private static final Mono<MatchResult> MATCH = MatchResult.match();
    private static final Mono<MatchResult> NO_MATCH = MatchResult.notMatch();

    private final Environment environment;
    private final boolean separatePort;
    /** The separate port once known, else {@link #UNKNOWN} or {@link #SHARED}; every thread computes the same value. */
    private volatile int managementPort = UNKNOWN;

    public ManagementPortMatcher(Environment environment) {
        this.environment = environment;
        this.separatePort = ManagementPortType.get(environment) == ManagementPortType.DIFFERENT;
    }

    @Override
    public Mono<MatchResult> matches(ServerWebExchange exchange) {
        return onManagementPort(exchange) ? MATCH : NO_MATCH;
    }

    public boolean onManagementPort(ServerWebExchange exchange) {
        if (!separatePort) {
            return false;
        }
        int port = managementPort();
        InetSocketAddress local = exchange.getRequest().getLocalAddress();
        return port > 0 && local != null && local.getPort() == port;
    }

    private int managementPort() {
        int port = managementPort;
        if (port != UNKNOWN) {
            return port;
        }
        Integer management = environment.getProperty("local.management.port", Integer.class);
        Integer server = environment.getProperty("local.server.port", Integer.class);
        if (management == null || management <= 0 || server == null) {
            return UNKNOWN;         // not both started yet: look again on the next request
        }
        port = management.equals(server) ? SHARED : management;
        managementPort = port;
        return port;
    }
}
