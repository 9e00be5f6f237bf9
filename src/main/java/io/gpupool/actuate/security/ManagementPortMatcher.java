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
 * <p>Whether there is a separate port at all is fixed by the configuration and decided once. The ports
 * themselves are read on every request: a server stopped and started again (a paused context, for
 * one) listens on a new random port, and a remembered one would let its requests pass as the
 * application port's.
 */
public final class ManagementPortMatcher implements ServerWebExchangeMatcher {

    // a Mono.just is immutable and can be answered to any number of subscribers
    private static final Mono<MatchResult> MATCH = MatchResult.match();
    private static final Mono<MatchResult> NO_MATCH = MatchResult.notMatch();

    private final Environment environment;
    private final boolean separatePort;

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
        Integer port = environment.getProperty("local.management.port", Integer.class);
        InetSocketAddress local = exchange.getRequest().getLocalAddress();
        return port != null && port > 0 && local != null && local.getPort() == port
                && !port.equals(environment.getProperty("local.server.port", Integer.class));
    }
}
