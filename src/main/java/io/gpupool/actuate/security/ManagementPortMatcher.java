package io.gpupool.actuate.security;

import java.net.InetSocketAddress;

import org.springframework.core.env.Environment;
import org.springframework.security.web.server.util.matcher.ServerWebExchangeMatcher;
import org.springframework.web.server.ServerWebExchange;
import reactor.core.publisher.Mono;

/**
 * Requests that arrived on a separate management port ({@code local.management.port}, set once that
 * server started). Never matches when the actuator shares the application port. Both security chains use
 * it: the inference API's chain does not apply there, and the operations chain denies what is not an
 * endpoint.
 */
public final class ManagementPortMatcher implements ServerWebExchangeMatcher {

    private final Environment environment;

    public ManagementPortMatcher(Environment environment) {
        this.environment = environment;
    }

    @Override
    public Mono<MatchResult> matches(ServerWebExchange exchange) {
        return onManagementPort(exchange) ? MatchResult.match() : MatchResult.notMatch();
    }

    public boolean onManagementPort(ServerWebExchange exchange) {
        Integer port = environment.getProperty("local.management.port", Integer.class);
        InetSocketAddress local = exchange.getRequest().getLocalAddress();
        return port != null && port > 0 && local != null && local.getPort() == port
                && !port.equals(environment.getProperty("local.server.port", Integer.class));
    }
}
