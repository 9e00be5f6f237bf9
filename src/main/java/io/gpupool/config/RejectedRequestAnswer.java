package io.gpupool.config;

import java.nio.charset.StandardCharsets;
import java.util.Set;

import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.core.io.buffer.DataBuffer;
import org.springframework.http.HttpHeaders;
import org.springframework.http.HttpStatus;
import org.springframework.http.MediaType;
import org.springframework.http.server.reactive.ServerHttpResponse;
import org.springframework.security.web.server.firewall.ServerExchangeRejectedHandler;

import reactor.core.publisher.Mono;

/**
 * The answer to a request Spring Security's firewall refuses before any route sees it (a path with {@code //},
 * {@code ./} or {@code ../} segments, an encoded slash, a semicolon, a control character): 400 with the JSON error
 * every other refusal of this server has, naming what the firewall objected to. Spring Security's own handler
 * answers an empty 400, which tells a client nothing. A method the firewall does not know ({@code TRACE},
 * {@code CONNECT}, a lower-case {@code get}, an invented one) is a 405 naming it, with the methods the server answers
 * as {@code Allow}; a method the firewall lets through reaches the routes, which answer 405 with each path's own.
 */
@Configuration(proxyBeanMethods = false)
public class RejectedRequestAnswer {

    /** The methods Spring Security's strict firewall lets through (methods are case-sensitive: "get" is none). */
    private static final Set<String> FIREWALL_METHODS = Set.of("GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS",
            "PATCH");
    /** Every method some path of this server answers; a refused method gets 405 with these as {@code Allow}. */
    private static final String ANSWERED = "GET, HEAD, POST, DELETE, OPTIONS";

    @Bean
    ServerExchangeRejectedHandler jsonExchangeRejectedHandler() {
        return (exchange, rejected) -> {
            ServerHttpResponse response = exchange.getResponse();
            if (response.isCommitted()) {
                return Mono.empty();
            }
            String method = exchange.getRequest().getMethod().name();
            boolean methodRefused = !FIREWALL_METHODS.contains(method);
            String error = methodRefused
                    ? "method " + ConnectionLimit.jsonSafe(method) + " is not allowed: this server answers "
                            + ANSWERED + " (OPTIONS lists the methods of each path)"
                    : "the request path is refused: " + ConnectionLimit.jsonSafe(String.valueOf(rejected.getMessage()))
                            + "; send the path as the protocol writes it (no empty, . or .. segments, encoded slashes,"
                            + " semicolons or control characters)";
            byte[] body = ConnectionLimit.errorJson(error).getBytes(StandardCharsets.UTF_8);
            response.setStatusCode(methodRefused ? HttpStatus.METHOD_NOT_ALLOWED : HttpStatus.BAD_REQUEST);
            if (methodRefused) {
                response.getHeaders().set(HttpHeaders.ALLOW, ANSWERED);
            }
            response.getHeaders().setContentType(MediaType.APPLICATION_JSON);
            response.getHeaders().setContentLength(body.length);
            DataBuffer buffer = response.bufferFactory().wrap(body);
            return response.writeWith(Mono.just(buffer));
        };
    }
}
