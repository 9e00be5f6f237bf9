package io.gpupool.actuate;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;

import org.springframework.boot.actuate.endpoint.annotation.ReadOperation;
import org.springframework.boot.actuate.endpoint.web.WebEndpointResponse;
import org.springframework.boot.actuate.endpoint.web.annotation.WebEndpoint;
import org.springframework.util.MimeType;

/**
 * {@code GET /actuator/dashboard}: the live pool dashboard, one static HTML page with its script
 * inline (no build step), read from {@code classpath:io/gpupool/actuate/dashboard.html}.
 *
 * <p>Served as an actuator endpoint so that it lives on the management port next to the
 * {@code gpupool} endpoint it polls (same origin: no CORS), and is exposed, secured and moved with
 * the rest of the actuator. The page itself is public; its tuning and trim controls send the operator
 * credential the user types in.
 */
@WebEndpoint(id = "dashboard")
public class DashboardEndpoint {

    static final MimeType TEXT_HTML = new MimeType("text", "html", StandardCharsets.UTF_8);

    private final String page;

    public DashboardEndpoint() {
        try (InputStream in = DashboardEndpoint.class.getResourceAsStream("dashboard.html")) {
            if (in == null) {
                throw new IllegalStateException("dashboard.html is missing from the classpath next to "
                        + DashboardEndpoint.class.getName());
            }
            page = new String(in.readAllBytes(), StandardCharsets.UTF_8);
        }
        catch (IOException ex) {
            throw new UncheckedIOException(ex);
        }
    }

    @ReadOperation(produces = "text/html")
    public WebEndpointResponse<String> page() {
        return new WebEndpointResponse<>(page, TEXT_HTML);
    }
}
