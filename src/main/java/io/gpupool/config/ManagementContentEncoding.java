package io.gpupool.config;

import java.util.Locale;

import io.gpupool.serving.Shown;
import org.springframework.boot.actuate.autoconfigure.endpoint.web.WebEndpointProperties;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.context.annotation.Bean;
import org.springframework.http.HttpHeaders;
import org.springframework.http.HttpStatus;
import org.springframework.web.server.WebFilter;

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

    @Bean
    WebFilter gpupoolManagementContentEncoding(ObjectProvider<WebEndpointProperties> endpoints) {
        String basePath = endpoints.getIfAvailable(WebEndpointProperties::new).getBasePath();
        return (exchange, chain) -> {
            HttpHeaders headers = exchange.getRequest().getHeaders();
            String coding = String.join(", ", headers.getOrEmpty(HttpHeaders.CONTENT_ENCODING)).trim();
            boolean body = headers.getContentLength() > 0 || headers.containsHeader(HttpHeaders.TRANSFER_ENCODING);
            if (!body || coding.isEmpty() || coding.toLowerCase(Locale.ROOT).equals("identity")
                    || !ManagementBodyErrors.underActuator(exchange, basePath)) {
                return chain.filter(exchange);
            }
            exchange.getResponse().getHeaders().set(HttpHeaders.ACCEPT_ENCODING, "identity");
            return ManagementBodyErrors.answer(exchange.getResponse(), HttpStatus.UNSUPPORTED_MEDIA_TYPE,
                    "the management endpoints read no Content-Encoding (the request has '" + Shown.clip(coding)
                            + "'); send the body uncompressed");
        };
    }
}
