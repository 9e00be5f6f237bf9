package io.gpupool.config;

import java.nio.charset.StandardCharsets;

import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.core.io.buffer.DataBuffer;
import org.springframework.http.HttpStatus;
import org.springframework.http.MediaType;
import org.springframework.http.server.reactive.ServerHttpResponse;
import org.springframework.security.web.server.firewall.ServerExchangeRejectedHandler;

import reactor.core.publisher.Mono;

/**
 * The answer to a request Spring Security's firewall refuses before any route sees it (a path with {@code //},
 * {@code ./} or {@code ../} segments, an encoded slash, a semicolon, a control character): 400 with the JSON error
 * every other refusal of this server has, naming what the firewall objected to. Spring Security's own handler
 * answers an empty 400, which tells a client nothing.
 */
@Configuration(proxyBeanMethods = false)
public class RejectedRequestAnswer {

    @Bean
    ServerExchangeRejectedHandler jsonExchangeRejectedHandler() {
        return (exchange, rejected) -> {
            ServerHttpResponse response = exchange.getResponse();
            if (response.isCommitted()) {
                return Mono.empty();
            }
            String error = "the request path is refused: " + ConnectionLimit.jsonSafe(String.valueOf(rejected.getMessage()))
                    + "; send the path as the protocol writes it (no empty, . or .. segments, encoded slashes,"
                    + " semicolons or control characters)";
            byte[] body = ConnectionLimit.errorJson(error).getBytes(StandardCharsets.UTF_8);
            response.setStatusCode(HttpStatus.BAD_REQUEST);
            response.getHeaders().setContentType(MediaType.APPLICATION_JSON);
            response.getHeaders().setContentLength(body.length);
            DataBuffer buffer = response.bufferFactory().wrap(body);
            return response.writeWith(Mono.just(buffer));
        };
    }
}
