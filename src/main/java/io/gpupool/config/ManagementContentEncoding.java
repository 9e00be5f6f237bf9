package io.gpupool.config;

import java.util.List;
import java.util.Locale;
import java.util.Map;

import org.springframework.boot.actuate.autoconfigure.endpoint.web.WebEndpointProperties;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.context.annotation.Bean;
import org.springframework.http.HttpHeaders;
import org.springframework.http.HttpStatus;
import org.springframework.http.MediaType;
import org.springframework.http.server.reactive.ServerHttpResponse;
import org.springframework.web.server.WebFilter;
import reactor.core.publisher.Mono;
import tools.jackson.databind.json.JsonMapper;

/**
 * Refuses an actuator request whose body is content-encoded (gzip, br, ...) with 415 naming the coding. The actuator
 * reads bodies as they arrive and ignores {@code Content-Encoding}: a gzip body would be refused as "not valid JSON"
 * (naming a control character), and a body labelled with a coding it was not actually compressed with would be
 * applied as plain JSON, so a tuning a proxy or client meant differently could take effect. Operators' bodies are a
 * few fields; they gain nothing from compression. {@code identity} is plain and passes, and so does a request
 * without a body (a stray header on a read changes nothing).
 *
 * <p>Listed in {@code META-INF/spring/...ManagementContextConfiguration.imports}, as {@link ManagementBodyErrors}:
 * on its own management port the filter lives in the actuator's child context; on a shared port it leaves every path
 * outside the actuator's base path to the inference API, which decodes gzip and deflate itself.
 */
public class ManagementContentEncoding {

    private static final JsonMapper JSON = JsonMapper.shared();

    @Bean
    WebFilter gpupoolManagementContentEncoding(ObjectProvider<WebEndpointProperties> endpoints) {
        String basePath = endpoints.getIfAvailable(WebEndpointProperties::new).getBasePath();
        return (exchange, chain) -> {
            List<String> codings = exchange.getRequest().getHeaders().getOrEmpty(HttpHeaders.CONTENT_ENCODING);
            String path = exchange.getRequest().getPath().pathWithinApplication().value();
            boolean underActuator = basePath.isEmpty() || path.equals(basePath) || path.startsWith(basePath + "/");
            String coding = String.join(", ", codings).trim();
            HttpHeaders headers = exchange.getRequest().getHeaders();
            boolean body = headers.getContentLength() > 0 || headers.containsHeader(HttpHeaders.TRANSFER_ENCODING);
            if (!underActuator || !body || coding.isEmpty() || coding.toLowerCase(Locale.ROOT).equals("identity")) {
                return chain.filter(exchange);
            }
            return refuse(exchange.getResponse(), coding);
        };
    }

    private static Mono<Void> refuse(ServerHttpResponse response, String coding) {
        String shown = coding.length() > 64 ? coding.substring(0, 64) + "..." : coding;
        response.setStatusCode(HttpStatus.UNSUPPORTED_MEDIA_TYPE);
        response.getHeaders().setContentType(MediaType.APPLICATION_JSON);
        response.getHeaders().set("Accept-Encoding", "identity");
        byte[] body = JSON.writeValueAsBytes(Map.of("error", "the management endpoints read no Content-Encoding "
                + "(the request has '" + shown + "'); send the body uncompressed"));
        return response.writeWith(Mono.just(response.bufferFactory().wrap(body)));
    }
}
