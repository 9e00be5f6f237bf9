package io.gpupool.serving;

import org.springframework.http.MediaType;
import org.springframework.web.reactive.function.server.ServerRequest;
import org.springframework.web.reactive.function.server.ServerResponse;
import reactor.core.publisher.Mono;

import java.util.List;

/**
 * Triton's system and CUDA shared-memory extensions, answered as a server that offers neither:
 * status lists no region (and a region's status is a 404 naming it), register is refused with 400 saying
 * so, unregister has nothing to remove and succeeds (clients call it on clean-up). Inputs that name a region are refused by the
 * {@link RequestDecoder} with the same message.
 */
public final class SharedMemoryHandler {

    private final int maxBodyBytes;

    /** @param maxBodyBytes {@code gpupool.serving.max-body-size}: bodies these endpoints drop are bounded too */
    public SharedMemoryHandler(int maxBodyBytes) {
        this.maxBodyBytes = maxBodyBytes;
    }

    /** GET /v2/{kind}sharedmemory/status: no region. */
    public Mono<ServerResponse> status(ServerRequest request) {
        return ServerResponse.ok().contentType(MediaType.APPLICATION_JSON).bodyValue(List.of());
    }

    /** GET /v2/{kind}sharedmemory/region/{r}/status: 404 naming the region, which cannot have been registered. */
    public Mono<ServerResponse> regionStatus(ServerRequest request) {
        String kind = kind(request);
        return ErrorResponses.of(ServingException.notFound("no " + kind + " shared memory region '"
                + Shown.clip(request.pathVariable("region")) + "' is registered; " + unsupported(kind)));
    }

    /** POST /v2/{kind}sharedmemory/region/{r}/register. */
    public Mono<ServerResponse> register(ServerRequest request) {
        return RequestBodies.discard(request, maxBodyBytes)
                .then(Mono.<ServerResponse>error(ServingException.badRequest(unsupported(kind(request)))))
                .onErrorResume(ErrorResponses::of);
    }

    /** POST /v2/{kind}sharedmemory[/region/{r}]/unregister. */
    public Mono<ServerResponse> unregister(ServerRequest request) {
        return RequestBodies.discard(request, maxBodyBytes).then(ServerResponse.ok().build())
                .onErrorResume(ErrorResponses::of);
    }

    /** The refusal for {@code kind} ("system" or "CUDA"). */
    static String unsupported(String kind) {
        return kind + " shared memory is not supported by this server; send tensor data in the request body "
                + "(JSON or the binary tensor data extension)";
    }

    private static String kind(ServerRequest request) {
        return request.path().startsWith("/v2/cuda") ? "CUDA" : "system";
    }
}
