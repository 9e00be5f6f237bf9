package io.gpupool.config;

import java.util.Map;

import org.springframework.beans.factory.ObjectProvider;
import org.springframework.boot.actuate.autoconfigure.endpoint.web.WebEndpointProperties;
import org.springframework.context.annotation.Bean;
import org.springframework.core.Ordered;
import org.springframework.core.annotation.Order;
import org.springframework.core.codec.DecodingException;
import org.springframework.http.HttpStatus;
import org.springframework.http.HttpStatusCode;
import org.springframework.http.MediaType;
import org.springframework.http.server.reactive.ServerHttpResponse;
import org.springframework.web.server.ServerWebExchange;
import org.springframework.web.server.ServerWebInputException;
import org.springframework.web.server.WebExceptionHandler;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.Mono;
import reactor.netty.channel.AbortedException;
import tools.jackson.core.JacksonException;
import tools.jackson.databind.json.JsonMapper;

/**
 * Answers an actuator request whose body Boot could not read (not JSON, or JSON but not an object, as an
 * endpoint's write operation needs) with a 400 whose {@code error} says so. Boot's own error handler answers
 * these with a bare "Bad Request" that names nothing, so an operator who sent {@code [..]} or a truncated
 * object to {@code /actuator/gpupool/{device}} could not tell what was wrong. A body its client abandoned is
 * counted as the client's leaving, not as a server error.
 *
 * <p>Listed in {@code META-INF/spring/...ManagementContextConfiguration.imports} (no {@code @Configuration},
 * as {@link ManagementServerLimits}): on its own management port the handler lives in the actuator's child
 * context; on a shared port in the application's, where it leaves every path outside the actuator's base
 * path to the inference API's own handling.
 */
public class ManagementBodyErrors {

    private static final JsonMapper JSON = JsonMapper.shared();

    @Bean
    @Order(Ordered.HIGHEST_PRECEDENCE)
    WebExceptionHandler gpupoolManagementBodyErrors(ObjectProvider<WebEndpointProperties> endpoints) {
        String basePath = endpoints.getIfAvailable(WebEndpointProperties::new).getBasePath();
        return (exchange, failure) -> failure instanceof ServerWebInputException input
                && input.getStatusCode().value() == HttpStatus.BAD_REQUEST.value()
                && underActuator(exchange, basePath) && !exchange.getResponse().isCommitted()
                ? answer(exchange.getResponse(), HttpStatus.BAD_REQUEST, describe(input))
                : Mono.error(failure);
    }

    /** Whether the exchange is the actuator's (on a shared port the other paths are the inference API's). */
    static boolean underActuator(ServerWebExchange exchange, String basePath) {
        String path = exchange.getRequest().getPath().pathWithinApplication().value();
        return basePath.isEmpty() || path.equals(basePath) || path.startsWith(basePath + "/");
    }

    /**
     * A client that closed its connection before its body arrived (an operator's script stopped, a proxy's timeout)
     * is no server error: without this handler Boot logs it as a 500 and the request meter counts a 5xx that would
     * fire server-error alerts. Handled here it gets no answer (nobody is left to read one) and the status 499
     * ("client closed request", as proxies record it), which the meter counts as a client error, or as UNKNOWN when
     * the exchange's cancellation reaches it first.
     */
    @Bean
    @Order(Ordered.HIGHEST_PRECEDENCE)
    WebExceptionHandler gpupoolManagementClientGone(ObjectProvider<WebEndpointProperties> endpoints) {
        String basePath = endpoints.getIfAvailable(WebEndpointProperties::new).getBasePath();
        return (exchange, failure) -> clientWentAway(failure) && underActuator(exchange, basePath)
                ? clientClosed(exchange.getResponse())
                : Mono.error(failure);
    }

    private static Mono<Void> clientClosed(ServerHttpResponse response) {
        response.setStatusCode(HttpStatusCode.valueOf(499));
        return Mono.empty();
    }

    private static boolean clientWentAway(Throwable failure) {
        for (Throwable cause = failure; cause != null; cause = cause.getCause()) {
            if (cause instanceof AbortedException || AbortedException.isConnectionReset(cause)) {
                return true;
            }
        }
        return false;
    }

    /** What the body got wrong, in the operator's terms; the decoder's own text names Java types. */
    static String describe(ServerWebInputException input) {
        for (Throwable cause = input; cause != null; cause = cause.getCause()) {
            if (cause instanceof DecodingException decoding) {
                String detail = String.valueOf(decoding.getMessage());
                if (detail.contains("Cannot deserialize value of type")) {
                    String field = fieldOf(decoding);
                    return field == null
                            ? "the request body must be one JSON object of fields, such as {\"coalesceThreshold\": 20}"
                            : "field " + field + " must be one JSON number, string or boolean, not an array or object";
                }
                return "the request body is not valid JSON: " + parserReason(detail);
            }
        }
        return "the request body could not be read: " + firstLine(String.valueOf(input.getReason()));
    }

    /** The body's field whose value could not be read, when the reader's failure names one (a value of a field). */
    private static @Nullable String fieldOf(Throwable decoding) {
        for (Throwable cause = decoding; cause != null; cause = cause.getCause()) {
            if (cause instanceof JacksonException jackson && !jackson.getPath().isEmpty()) {
                String name = jackson.getPath().getFirst().getPropertyName();
                return name == null ? null : firstLine(name);
            }
        }
        return null;
    }

    /** The parser's reason without the decoder's prefix and the location it cannot give (the source is hidden). */
    private static String parserReason(String detail) {
        String reason = firstLine(detail.replaceFirst("^JSON decoding error: ", ""));
        int location = reason.indexOf(" (start marker at ");
        return location < 0 ? reason : reason.substring(0, location);
    }

    private static String firstLine(String text) {
        int end = text.indexOf('\n');
        String line = end < 0 ? text : text.substring(0, end);
        return line.length() > 200 ? line.substring(0, 200) + "..." : line;
    }

    /** Answers {@code status} with the JSON error every refusal of this server has. */
    static Mono<Void> answer(ServerHttpResponse response, HttpStatus status, String error) {
        response.setStatusCode(status);
        response.getHeaders().setContentType(MediaType.APPLICATION_JSON);
        byte[] body = JSON.writeValueAsBytes(Map.of("error", error));
        return response.writeWith(Mono.just(response.bufferFactory().wrap(body)));
    }
}
