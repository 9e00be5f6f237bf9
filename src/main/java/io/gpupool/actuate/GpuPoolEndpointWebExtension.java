package io.gpupool.actuate;

import java.util.Map;

import io.gpupool.serving.Shown;
import io.gpupool.memory.PoolTuning;
import org.jspecify.annotations.Nullable;
import org.springframework.boot.actuate.endpoint.annotation.DeleteOperation;
import org.springframework.boot.actuate.endpoint.annotation.ReadOperation;
import org.springframework.boot.actuate.endpoint.annotation.Selector;
import org.springframework.boot.actuate.endpoint.annotation.WriteOperation;
import org.springframework.boot.actuate.endpoint.web.WebEndpointResponse;
import org.springframework.boot.actuate.endpoint.web.annotation.EndpointWebExtension;
import org.springframework.util.MimeType;

/**
 * HTTP statuses for {@link GpuPoolEndpoint}, as Boot's {@code CachesEndpointWebExtension} does for
 * {@code caches}: 404 for an unknown device or section, 400 with a body that names the field, the
 * value and the allowed range for a tuning that cannot be applied, 409 when trace recording is asked
 * of a pool that is not wrapped by a trace recorder, and {@code text/csv} for the trace, streamed.
 */
@EndpointWebExtension(endpoint = GpuPoolEndpoint.class)
public class GpuPoolEndpointWebExtension {

    static final MimeType TEXT_CSV = MimeType.valueOf("text/csv");
    static final MimeType JSON = MimeType.valueOf("application/json");
    static final int STATUS_CONFLICT = 409;

    private final GpuPoolEndpoint delegate;
    private final ManagedPools pools;

    public GpuPoolEndpointWebExtension(GpuPoolEndpoint delegate, ManagedPools pools) {
        this.delegate = delegate;
        this.pools = pools;
    }

    @ReadOperation
    public WebEndpointResponse<Object> device(@Selector String device) {
        GpuPoolEndpoint.DeviceDescriptor descriptor = delegate.device(device);
        return descriptor == null ? noDevice(device) : new WebEndpointResponse<>(descriptor);
    }

    @ReadOperation(produces = {"application/json", "text/csv"})
    public WebEndpointResponse<Object> section(@Selector String device, @Selector String section,
                                               @Nullable String addresses) {
        ManagedPool pool = pools.find(device).orElse(null);
        if (pool == null) {
            return noDevice(device);
        }
        return switch (section) {
            case GpuPoolEndpoint.LAYOUT -> new WebEndpointResponse<>(delegate.section(device, section, null), JSON);
            case GpuPoolEndpoint.TRACE -> {
                if (pool.trace().isEmpty()) {
                    yield traceUnavailable(device);
                }
                try {
                    yield new WebEndpointResponse<>(delegate.section(device, section, addresses), TEXT_CSV);
                } catch (IllegalArgumentException e) {
                    yield new WebEndpointResponse<>(Map.of("error", String.valueOf(e.getMessage())),
                            WebEndpointResponse.STATUS_BAD_REQUEST, JSON);
                }
            }
            default -> noSection(section, GpuPoolEndpoint.LAYOUT + ", " + GpuPoolEndpoint.TRACE);
        };
    }

    @WriteOperation
    public WebEndpointResponse<Object> tune(@Selector String device, PoolTuning tuning, GraphTuning.Fields graphs) {
        try {
            GpuPoolEndpoint.TunedDescriptor tuned = delegate.tune(device, tuning, graphs);
            return tuned == null ? noDevice(device) : new WebEndpointResponse<>(tuned);
        }
        catch (TuningException ex) {
            return badRequest(ex);
        }
    }

    /** The 400 answer to a tuning that does not bind or that the pool rejects. */
    static WebEndpointResponse<Object> badRequest(TuningException ex) {
        return new WebEndpointResponse<>(new TuningError(String.valueOf(ex.getMessage()), ex.field(), ex.value(),
                ex.allowed()), WebEndpointResponse.STATUS_BAD_REQUEST);
    }

    @WriteOperation
    public WebEndpointResponse<Object> record(@Selector String device, @Selector String section,
                                              @Nullable String recording) {
        ManagedPool pool = pools.find(device).orElse(null);
        if (pool == null) {
            return noDevice(device);
        }
        if (!GpuPoolEndpoint.TRACE.equals(section)) {
            return noSection(section, GpuPoolEndpoint.TRACE);
        }
        if (pool.trace().isEmpty()) {
            return traceUnavailable(device);
        }
        // true or false only: Spring's conversion would also take "yes", "on", "1" and give a bare 400 for the rest
        if (recording == null || !(recording.equals("true") || recording.equals("false"))) {
            return new WebEndpointResponse<>(Map.of("error", "recording = " + (recording == null ? "(missing)"
                    : Shown.clip(recording)) + " is invalid; allowed: true or false"), WebEndpointResponse.STATUS_BAD_REQUEST);
        }
        return new WebEndpointResponse<>(delegate.record(device, section, Boolean.parseBoolean(recording)));
    }

    @DeleteOperation
    public WebEndpointResponse<Object> trimDevice(@Selector String device) {
        GpuPoolEndpoint.TrimDescriptor trimmed = delegate.trimDevice(device);
        return trimmed == null ? noDevice(device) : new WebEndpointResponse<>(trimmed);
    }

    /** 404 naming the device asked for and those there are. */
    private WebEndpointResponse<Object> noDevice(String device) {
        String known = String.join(", ", pools.all().stream().map(ManagedPool::device).toList());
        return new WebEndpointResponse<>(Map.of("error", "no device '" + Shown.clip(device) + "'; devices: "
                + (known.isEmpty() ? "none" : known)), WebEndpointResponse.STATUS_NOT_FOUND, JSON);
    }

    /** 404 naming the section asked for and those the operation has. */
    private static WebEndpointResponse<Object> noSection(String section, String sections) {
        return new WebEndpointResponse<>(Map.of("error", "no section '" + Shown.clip(section) + "'; sections: "
                + sections), WebEndpointResponse.STATUS_NOT_FOUND, JSON);
    }

    private static WebEndpointResponse<Object> traceUnavailable(String device) {
        return new WebEndpointResponse<>(Map.of("error", "pool " + device
                + " records no allocation trace (it is not wrapped by the trace recorder)"), STATUS_CONFLICT, JSON);
    }

    /** The 400 body: {@code error} for people, {@code field}/{@code value}/{@code allowed} for tools. */
    public record TuningError(String error, @Nullable String field, @Nullable String value,
                              @Nullable String allowed) {
    }
}
