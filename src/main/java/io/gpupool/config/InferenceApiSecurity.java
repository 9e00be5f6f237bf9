package io.gpupool.config;

import io.gpupool.actuate.security.ManagementPortMatcher;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.core.Ordered;
import org.springframework.core.annotation.Order;
import org.springframework.core.env.Environment;
import org.springframework.security.config.web.server.ServerHttpSecurity;
import org.springframework.security.web.server.SecurityWebFilterChain;
import org.springframework.security.web.server.util.matcher.AndServerWebExchangeMatcher;
import org.springframework.security.web.server.util.matcher.NegatedServerWebExchangeMatcher;
import org.springframework.security.web.server.util.matcher.ServerWebExchangeMatchers;

/**
 * The inference API ({@code /v2/**}) is open, as Triton's and KServe's are: clients of the Open
 * Inference Protocol send no credentials. CSRF protection is off for it because no browser session
 * is involved. This chain matches only {@code /v2/**} on the application port; the actuator's own rules
 * live with it.
 */
@Configuration(proxyBeanMethods = false)
public class InferenceApiSecurity {

    @Bean
    @Order(Ordered.HIGHEST_PRECEDENCE)
    SecurityWebFilterChain inferenceApiSecurityChain(ServerHttpSecurity http, Environment environment) {
        // not on the management port: there the operations chain denies everything that is not an endpoint
        return http.securityMatcher(new AndServerWebExchangeMatcher(ServerWebExchangeMatchers.pathMatchers("/v2", "/v2/**"),
                        new NegatedServerWebExchangeMatcher(new ManagementPortMatcher(environment))))
                .authorizeExchange(exchanges -> exchanges.anyExchange().permitAll())
                .csrf(ServerHttpSecurity.CsrfSpec::disable)
                .httpBasic(ServerHttpSecurity.HttpBasicSpec::disable)
                .formLogin(ServerHttpSecurity.FormLoginSpec::disable)
                .requestCache(ServerHttpSecurity.RequestCacheSpec::disable)
                .securityContextRepository(org.springframework.security.web.server.context.NoOpServerSecurityContextRepository.getInstance())
                .build();
    }
}
