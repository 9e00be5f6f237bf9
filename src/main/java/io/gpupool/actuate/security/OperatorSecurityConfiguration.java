package io.gpupool.actuate.security;

import java.net.InetSocketAddress;
import java.security.SecureRandom;
import java.util.Base64;

import io.gpupool.actuate.GpuPoolEndpoint;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.boot.context.properties.EnableConfigurationProperties;
import org.springframework.boot.security.autoconfigure.actuate.web.reactive.EndpointRequest;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.core.env.Environment;
import org.springframework.core.env.Profiles;
import org.springframework.http.HttpMethod;
import org.springframework.http.HttpStatus;
import org.springframework.security.config.annotation.web.reactive.EnableWebFluxSecurity;
import org.springframework.security.config.web.server.ServerHttpSecurity;
import org.springframework.security.core.userdetails.MapReactiveUserDetailsService;
import org.springframework.security.core.userdetails.User;
import org.springframework.security.crypto.factory.PasswordEncoderFactories;
import org.springframework.security.crypto.password.PasswordEncoder;
import org.springframework.security.web.server.DelegatingServerAuthenticationEntryPoint;
import org.springframework.security.web.server.SecurityWebFilterChain;
import org.springframework.security.web.server.ServerAuthenticationEntryPoint;
import org.springframework.security.web.server.authentication.HttpBasicServerAuthenticationEntryPoint;
import org.springframework.security.web.server.authentication.HttpStatusServerEntryPoint;
import org.springframework.security.web.server.context.NoOpServerSecurityContextRepository;
import org.springframework.security.web.server.util.matcher.AndServerWebExchangeMatcher;
import org.springframework.security.web.server.util.matcher.PathPatternParserServerWebExchangeMatcher;
import org.springframework.security.web.server.util.matcher.ServerWebExchangeMatcher;

/**
 * Who may do what, on both ports.
 *
 * <pre>
 *  request                                              rule
 *  GET  health, metrics, prometheus, gpupool (actuator) anyone (monitoring, probes, the dashboard's polling)
 *  GET  dashboard (actuator)                            anyone (the page; its controls need the credential)
 *  POST/DELETE gpupool                                  ROLE_OPERATOR via HTTP Basic, else 401
 *  any other actuator endpoint, any method              denied (401 anonymous, 403 operator)
 *  anything else on the management port                 denied
 *  everything else (the inference API on the app port)  open: put it behind your gateway if needed
 * </pre>
 *
 * Stateless: no session, no CSRF token (no cookie is ever issued, so there is nothing to forge).
 * The single operator user comes from {@link OperatorSecurityProperties}; in the {@code production}
 * profile its password must be configured, elsewhere a random one is generated and logged once.
 */
@Configuration(proxyBeanMethods = false)
@EnableWebFluxSecurity
@EnableConfigurationProperties(OperatorSecurityProperties.class)
public class OperatorSecurityConfiguration {

    /** Role of the operator user (authority {@code ROLE_OPERATOR}). */
    public static final String OPERATOR = "OPERATOR";

    private static final Logger log = LoggerFactory.getLogger(OperatorSecurityConfiguration.class);

    @Bean
    public SecurityWebFilterChain operationsSecurityFilterChain(ServerHttpSecurity http, Environment environment) {
        return http
                .csrf(ServerHttpSecurity.CsrfSpec::disable)
                .formLogin(ServerHttpSecurity.FormLoginSpec::disable)
                .logout(ServerHttpSecurity.LogoutSpec::disable)
                .securityContextRepository(NoOpServerSecurityContextRepository.getInstance())
                .httpBasic(basic -> basic.authenticationEntryPoint(entryPoint()))
                .exceptionHandling(handling -> handling.authenticationEntryPoint(entryPoint()))
                .authorizeExchange(exchanges -> exchanges
                        .matchers(get(EndpointRequest.to("health", "metrics", "prometheus", "dashboard"))).permitAll()
                        .matchers(get(EndpointRequest.to(GpuPoolEndpoint.class))).permitAll()
                        .matchers(EndpointRequest.to(GpuPoolEndpoint.class)).hasRole(OPERATOR)
                        .matchers(EndpointRequest.toAnyEndpoint()).denyAll()
                        .matchers(onManagementPort(environment)).denyAll()
                        .anyExchange().permitAll())
                .build();
    }

    @Bean
    public MapReactiveUserDetailsService operatorUserDetailsService(OperatorSecurityProperties properties,
                                                                    Environment environment) {
        String password = properties.operatorPassword();
        if (password == null || password.isBlank()) {
            if (environment.acceptsProfiles(Profiles.of("production | prod"))) {
                throw new IllegalStateException("gpupool.security.operator-password is not set; the production "
                        + "profile has no default operator password. Set it (e.g. environment variable "
                        + "GPUPOOL_SECURITY_OPERATOR_PASSWORD from a Secret).");
            }
            password = randomPassword();
            log.warn("No gpupool.security.operator-password configured: generated operator password for user '{}': {}"
                    + " (set gpupool.security.operator-password to choose one; required in the production profile)",
                    properties.operatorUsername(), password);
        }
        PasswordEncoder encoder = PasswordEncoderFactories.createDelegatingPasswordEncoder();
        return new MapReactiveUserDetailsService(User.withUsername(properties.operatorUsername())
                .password(encoder.encode(password))
                .roles(OPERATOR)
                .build());
    }

    /**
     * 401 with a Basic challenge, except for scripts ({@code X-Requested-With: XMLHttpRequest}, as the
     * dashboard sends): they get a bare 401, so that the browser shows no login dialog of its own.
     */
    private static ServerAuthenticationEntryPoint entryPoint() {
        ServerWebExchangeMatcher script = exchange -> "XMLHttpRequest".equals(
                exchange.getRequest().getHeaders().getFirst("X-Requested-With"))
                ? ServerWebExchangeMatcher.MatchResult.match() : ServerWebExchangeMatcher.MatchResult.notMatch();
        DelegatingServerAuthenticationEntryPoint entryPoint = new DelegatingServerAuthenticationEntryPoint(
                new DelegatingServerAuthenticationEntryPoint.DelegateEntry(script,
                        new HttpStatusServerEntryPoint(HttpStatus.UNAUTHORIZED)));
        entryPoint.setDefaultEntryPoint(new HttpBasicServerAuthenticationEntryPoint());
        return entryPoint;
    }

    private static ServerWebExchangeMatcher get(ServerWebExchangeMatcher matcher) {
        return new AndServerWebExchangeMatcher(matcher, new PathPatternParserServerWebExchangeMatcher("/**",
                HttpMethod.GET));
    }

    /**
     * Requests that arrived on a separate management port ({@code local.management.port}, set once that
     * server started). False when the actuator shares the application port.
     */
    private static ServerWebExchangeMatcher onManagementPort(Environment environment) {
        return exchange -> {
            Integer port = environment.getProperty("local.management.port", Integer.class);
            InetSocketAddress local = exchange.getRequest().getLocalAddress();
            boolean management = port != null && port > 0 && local != null && local.getPort() == port
                    && !port.equals(environment.getProperty("local.server.port", Integer.class));
            return management ? ServerWebExchangeMatcher.MatchResult.match()
                    : ServerWebExchangeMatcher.MatchResult.notMatch();
        };
    }

    private static String randomPassword() {
        byte[] bytes = new byte[18];
        new SecureRandom().nextBytes(bytes);
        return Base64.getUrlEncoder().withoutPadding().encodeToString(bytes);
    }
}
