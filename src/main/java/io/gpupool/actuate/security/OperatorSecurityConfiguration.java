package io.gpupool.actuate.security;

import java.net.InetSocketAddress;
import java.security.SecureRandom;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;

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
import org.springframework.http.server.PathContainer;
import org.springframework.security.config.annotation.web.reactive.EnableWebFluxSecurity;
import org.springframework.security.config.web.server.ServerHttpSecurity;
import org.springframework.security.authentication.BadCredentialsException;
import org.springframework.security.authentication.ReactiveAuthenticationManager;
import org.springframework.security.authentication.UsernamePasswordAuthenticationToken;
import org.springframework.security.config.web.server.SecurityWebFiltersOrder;
import org.springframework.security.core.authority.AuthorityUtils;
import org.springframework.security.web.server.authentication.ServerAuthenticationFailureHandler;
import org.springframework.security.web.server.authentication.ServerAuthenticationSuccessHandler;
import org.springframework.security.web.server.authentication.WebFilterChainServerAuthenticationSuccessHandler;
import org.springframework.web.server.ServerWebExchange;
import org.springframework.web.server.WebFilter;
import reactor.core.publisher.Mono;
import org.springframework.security.web.server.DelegatingServerAuthenticationEntryPoint;
import org.springframework.security.web.server.SecurityWebFilterChain;
import org.springframework.security.web.server.ServerAuthenticationEntryPoint;
import org.springframework.security.web.server.authentication.HttpBasicServerAuthenticationEntryPoint;
import org.springframework.security.web.server.authentication.HttpStatusServerEntryPoint;
import org.springframework.security.web.server.context.NoOpServerSecurityContextRepository;
import org.springframework.security.web.server.util.matcher.AndServerWebExchangeMatcher;
import org.springframework.security.web.server.util.matcher.OrServerWebExchangeMatcher;
import org.springframework.security.web.server.util.matcher.PathPatternParserServerWebExchangeMatcher;
import org.springframework.security.web.server.util.matcher.ServerWebExchangeMatcher;

/**
 * Who may do what, on both ports.
 *
 * <pre>
 *  request                                              rule
 *  GET/HEAD health, metrics, prometheus, gpupool        anyone (monitoring, probes, the dashboard's polling)
 *  GET/HEAD dashboard (actuator)                        anyone (the page; its controls need the credential)
 *  GET gpupool/{device}/trace (the CSV)                 ROLE_OPERATOR via HTTP Basic, else 401
 *  POST/DELETE gpupool                                  ROLE_OPERATOR via HTTP Basic, else 401
 *  any other actuator endpoint, any method              denied (401 anonymous, 403 operator)
 *  anything else on the management port                 denied (the inference API included)
 *  everything else (the inference API on the app port)  open: put it behind your gateway if needed
 * </pre>
 *
 * The credential is checked in constant time ({@link OperatorCredential}); each failure is logged with
 * the client's address, and a client failing repeatedly must wait before its next try
 * ({@link LoginThrottle}, 429 with Retry-After meanwhile).
 *
 * Stateless: no session, no CSRF token (no cookie is ever issued, so there is nothing to forge).
 * The single operator user comes from {@link OperatorSecurityProperties}; in the {@code production}
 * profile its password must be configured and at least {@value #MIN_PRODUCTION_PASSWORD_LENGTH}
 * characters long, elsewhere a random one is generated and logged once when none is set.
 */
@Configuration(proxyBeanMethods = false)
@EnableWebFluxSecurity
@EnableConfigurationProperties(OperatorSecurityProperties.class)
public class OperatorSecurityConfiguration {

    /** Role of the operator user (authority {@code ROLE_OPERATOR}). */
    public static final String OPERATOR = "OPERATOR";

    private static final Logger log = LoggerFactory.getLogger(OperatorSecurityConfiguration.class);

    /** Shortest operator password the production profile accepts (18 random bytes in Base64 are 24). */
    public static final int MIN_PRODUCTION_PASSWORD_LENGTH = 12;

    @Bean
    public SecurityWebFilterChain operationsSecurityFilterChain(ServerHttpSecurity http, Environment environment,
                                                                OperatorCredential credential, LoginThrottle throttle) {
        ServerAuthenticationEntryPoint entryPoint = entryPoint();
        return http
                .csrf(ServerHttpSecurity.CsrfSpec::disable)
                .formLogin(ServerHttpSecurity.FormLoginSpec::disable)
                .logout(ServerHttpSecurity.LogoutSpec::disable)
                .securityContextRepository(NoOpServerSecurityContextRepository.getInstance())
                .addFilterBefore(refuseBlockedClients(throttle), SecurityWebFiltersOrder.HTTP_BASIC)
                .httpBasic(basic -> basic.authenticationEntryPoint(entryPoint)
                        .authenticationManager(authenticationManager(credential))
                        .authenticationFailureHandler(countFailure(throttle, entryPoint))
                        .authenticationSuccessHandler(clearFailures(throttle)))
                .exceptionHandling(handling -> handling.authenticationEntryPoint(entryPoint))
                .authorizeExchange(exchanges -> exchanges
                        .matchers(read(EndpointRequest.to("health", "metrics", "prometheus", "dashboard"))).permitAll()
                        // open: the pool's figures and layout; everything else of it (the trace, which can be large
                        // and shows the allocation pattern, and every change) is the operator's
                        .matchers(new AndServerWebExchangeMatcher(EndpointRequest.to(GpuPoolEndpoint.class),
                                OperatorSecurityConfiguration::isOpenPoolRead)).permitAll()
                        .matchers(EndpointRequest.to(GpuPoolEndpoint.class)).hasRole(OPERATOR)
                        .matchers(EndpointRequest.toAnyEndpoint()).denyAll()
                        .matchers(new ManagementPortMatcher(environment)).denyAll()
                        .anyExchange().permitAll())
                .build();
    }

    @Bean
    public OperatorCredential operatorCredential(OperatorSecurityProperties properties, Environment environment) {
        String password = properties.operatorPassword();
        boolean production = environment.acceptsProfiles(Profiles.of("production | prod"));
        if (password == null || password.isBlank()) {
            if (production) {
                throw new IllegalStateException("gpupool.security.operator-password is not set; the production "
                        + "profile has no default operator password. Set it (e.g. environment variable "
                        + "GPUPOOL_SECURITY_OPERATOR_PASSWORD from a Secret).");
            }
            password = randomPassword();
            log.warn("No gpupool.security.operator-password configured: generated operator password for user '{}': {}"
                    + " (set gpupool.security.operator-password to choose one; required in the production profile)",
                    properties.operatorUsername(), password);
        } else if (production && (password.length() < MIN_PRODUCTION_PASSWORD_LENGTH
                || password.equals(properties.operatorUsername()))) {
            throw new IllegalStateException("gpupool.security.operator-password is too weak for the production profile: "
                    + password.length() + " characters" + (password.equals(properties.operatorUsername())
                    ? ", equal to the user name" : "") + "; use at least " + MIN_PRODUCTION_PASSWORD_LENGTH
                    + " characters other than the user name (e.g. the output of `openssl rand -base64 18`)");
        }
        return new OperatorCredential(properties.operatorUsername(), password);
    }

    @Bean
    public LoginThrottle operatorLoginThrottle() {
        return LoginThrottle.standard();
    }

    /** Checks HTTP Basic credentials against the one operator, in constant time. */
    private static ReactiveAuthenticationManager authenticationManager(OperatorCredential credential) {
        return authentication -> Mono.fromCallable(() -> {
            String user = authentication.getName();
            Object password = authentication.getCredentials();
            if (!credential.matches(user, password == null ? null : password.toString())) {
                throw new BadCredentialsException("wrong user name or password for user '" + clip(user) + "'");
            }
            return new UsernamePasswordAuthenticationToken(credential.username(), null,
                    AuthorityUtils.createAuthorityList("ROLE_" + OPERATOR));
        });
    }

    /** A client blocked for earlier failures gets 429 with Retry-After, and its password is not checked. */
    private static WebFilter refuseBlockedClients(LoginThrottle throttle) {
        return (exchange, chain) -> {
            String authorization = exchange.getRequest().getHeaders().getFirst("Authorization");
            if (authorization == null) {
                return chain.filter(exchange);
            }
            Duration wait = throttle.remainingBlock(client(exchange));
            if (wait.isZero()) {
                return chain.filter(exchange);
            }
            exchange.getResponse().setStatusCode(HttpStatus.TOO_MANY_REQUESTS);
            exchange.getResponse().getHeaders().set("Retry-After", Long.toString(Math.max(1, (wait.toMillis() + 999) / 1000)));
            return exchange.getResponse().setComplete();
        };
    }

    private static ServerAuthenticationFailureHandler countFailure(LoginThrottle throttle,
                                                                   ServerAuthenticationEntryPoint entryPoint) {
        return (filterExchange, exception) -> {
            ServerWebExchange exchange = filterExchange.getExchange();
            String client = client(exchange);
            LoginThrottle.Failure failure = throttle.failed(client);
            if (failure.blocked().isZero()) {
                log.warn("Operator login failed from {}: {} ({} in a row)", client, exception.getMessage(),
                        failure.inARow());
            } else {
                log.warn("Operator login failed from {}: {} ({} in a row); further attempts from it are refused "
                        + "for {} s", client, exception.getMessage(), failure.inARow(), failure.blocked().toSeconds());
            }
            return entryPoint.commence(exchange, exception);
        };
    }

    private static ServerAuthenticationSuccessHandler clearFailures(LoginThrottle throttle) {
        ServerAuthenticationSuccessHandler proceed = new WebFilterChainServerAuthenticationSuccessHandler();
        return (filterExchange, authentication) -> {
            throttle.succeeded(client(filterExchange.getExchange()));
            return proceed.onAuthenticationSuccess(filterExchange, authentication);
        };
    }

    /** The address the connection came from (a proxy's own address when one is in front). */
    private static String client(ServerWebExchange exchange) {
        InetSocketAddress remote = exchange.getRequest().getRemoteAddress();
        return remote == null || remote.getAddress() == null ? "unknown" : remote.getAddress().getHostAddress();
    }

    private static String clip(String value) {
        if (value == null) {
            return "";
        }
        String printable = value.replaceAll("[^\\x20-\\x7E]", "?");
        return printable.length() <= 64 ? printable : printable.substring(0, 64) + "...";
    }

    /**
     * A read of the {@code gpupool} endpoint that anyone may make: GET or HEAD of the endpoint, of a device, or of a
     * device's {@code layout}, judged on the decoded path (an encoded {@code %74race} is the trace), and without any
     * query parameter: the actuator takes query parameters (and body fields) over the path's own selectors, so
     * {@code /layout?section=trace} would be served as the trace. An allowlist: whatever else reaches the endpoint
     * needs the operator.
     */
    static Mono<ServerWebExchangeMatcher.MatchResult> isOpenPoolRead(ServerWebExchange exchange) {
        HttpMethod method = exchange.getRequest().getMethod();
        boolean read = HttpMethod.GET.equals(method) || HttpMethod.HEAD.equals(method);
        if (!read || !exchange.getRequest().getQueryParams().isEmpty()) {
            return ServerWebExchangeMatcher.MatchResult.notMatch();
        }
        List<String> segments = new ArrayList<>();
        for (PathContainer.Element element : exchange.getRequest().getPath().pathWithinApplication().elements()) {
            if (element instanceof PathContainer.PathSegment segment) {
                segments.add(segment.valueToMatch());
            }
        }
        int endpoint = segments.indexOf(GpuPoolEndpoint.ID);
        int below = segments.size() - endpoint - 1;              // the endpoint, a device, a device's section
        boolean open = endpoint >= 0 && (below <= 1
                || below == 2 && segments.getLast().equals(GpuPoolEndpoint.LAYOUT));
        return open ? ServerWebExchangeMatcher.MatchResult.match() : ServerWebExchangeMatcher.MatchResult.notMatch();
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

    /** GET, and HEAD like it (a HEAD answers what GET would, without the body). */
    private static ServerWebExchangeMatcher read(ServerWebExchangeMatcher matcher) {
        return new AndServerWebExchangeMatcher(matcher, new OrServerWebExchangeMatcher(
                new PathPatternParserServerWebExchangeMatcher("/**", HttpMethod.GET),
                new PathPatternParserServerWebExchangeMatcher("/**", HttpMethod.HEAD)));
    }

    private static String randomPassword() {
        byte[] bytes = new byte[18];
        new SecureRandom().nextBytes(bytes);
        return Base64.getUrlEncoder().withoutPadding().encodeToString(bytes);
    }
}
