package io.gpupool.config;

import io.gpupool.actuate.security.ManagementPortMatcher;
import org.springframework.beans.factory.config.BeanPostProcessor;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.core.Ordered;
import org.springframework.core.annotation.Order;
import org.springframework.core.env.Environment;
import org.springframework.http.server.PathContainer;
import org.springframework.security.config.web.server.ServerHttpSecurity;
import org.springframework.security.web.server.SecurityWebFilterChain;
import org.springframework.security.web.server.context.NoOpServerSecurityContextRepository;
import org.springframework.security.web.server.util.matcher.ServerWebExchangeMatcher;
import org.springframework.web.server.ServerWebExchange;
import org.springframework.web.util.pattern.PathPattern;
import org.springframework.web.util.pattern.PathPatternParser;
import reactor.core.publisher.Mono;

/**
 * The inference API ({@code /v2/**}) is open, as Triton's and KServe's are: clients of the Open
 * Inference Protocol send no credentials. This chain matches only {@code /v2/**} on the application
 * port; the actuator's own rules live with it.
 *
 * <p>Every inference request passes through it, so it holds only what an open, stateless API needs:
 * the firewall (which runs before any chain) and the security response headers. No authorization
 * filter (there is nothing to decide), no CSRF (no browser session), no request cache, no session,
 * no login or logout. Its matcher is one class rather than a composition of Spring Security's
 * matchers, which log each step at debug level (and the logging bridge renders those messages even
 * when debug is off). Spring Security's own observations are kept off it ({@link InferenceChainUnobserved}).
 */
@Configuration(proxyBeanMethods = false)
public class InferenceApiSecurity {

    /** Keeps Spring Security's per-request observations off this chain (and on the others). */
    @Bean
    static BeanPostProcessor inferenceChainUnobserved() {
        return new InferenceChainUnobserved();
    }

    @Bean(InferenceChainUnobserved.INFERENCE_CHAIN)
    @Order(Ordered.HIGHEST_PRECEDENCE)
    SecurityWebFilterChain inferenceApiSecurityChain(ServerHttpSecurity http, Environment environment) {
        return http.securityMatcher(new InferenceRoutes(new ManagementPortMatcher(environment)))
                .csrf(ServerHttpSecurity.CsrfSpec::disable)
                .httpBasic(ServerHttpSecurity.HttpBasicSpec::disable)
                .formLogin(ServerHttpSecurity.FormLoginSpec::disable)
                .logout(ServerHttpSecurity.LogoutSpec::disable)
                .requestCache(ServerHttpSecurity.RequestCacheSpec::disable)
                .securityContextRepository(NoOpServerSecurityContextRepository.getInstance())
                .build();
    }

    /**
     * {@code /v2} and everything under it, on the application port only: on the management port the
     * operations chain denies everything that is not an endpoint.
     */
    static final class InferenceRoutes implements ServerWebExchangeMatcher {

        private static final PathPattern ROOT = PathPatternParser.defaultInstance.parse("/v2");
        private static final PathPattern UNDER = PathPatternParser.defaultInstance.parse("/v2/**");

        // a Mono.just is immutable and can be answered to any number of subscribers
        private static final Mono<MatchResult> MATCH = MatchResult.match();
        private static final Mono<MatchResult> NO_MATCH = MatchResult.notMatch();

        private final ManagementPortMatcher managementPort;

        InferenceRoutes(ManagementPortMatcher managementPort) {
            this.managementPort = managementPort;
        }

        @Override
        public Mono<MatchResult> matches(ServerWebExchange exchange) {
            PathContainer path = exchange.getRequest().getPath().pathWithinApplication();
            boolean inference = (ROOT.matches(path) || UNDER.matches(path)) && !managementPort.onManagementPort(exchange);
            return inference ? MATCH : NO_MATCH;
        }
    }
}
