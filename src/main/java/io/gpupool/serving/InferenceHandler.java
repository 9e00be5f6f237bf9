package io.gpupool.serving;

import io.gpupool.model.TensorSpec;
import io.gpupool.serving.protocol.Health;
import io.gpupool.serving.protocol.ModelMetadata;
import io.gpupool.serving.protocol.RepositoryIndexEntry;
import io.gpupool.serving.protocol.ServerMetadata;
import org.springframework.http.HttpHeaders;
import org.springframework.http.MediaType;
import org.springframework.web.reactive.function.server.ServerRequest;
import org.springframework.web.reactive.function.server.ServerResponse;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Schedulers;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.ObjectMapper;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * The Open Inference Protocol (KServe v2) REST endpoints. Handlers never block: request bodies are
 * decoded on the bounded-elastic scheduler, inference runs on the device workers, and every failure
 * becomes {@code {"error": "..."}} with its status (see {@link #error}).
 */
public final class InferenceHandler {

    /** Header that splits a body into its JSON part and the binary tensor data after it. */
    public static final String HEADER_LENGTH = "Inference-Header-Content-Length";

    private final ModelRegistry registry;
    private final RequestDecoder decoder;
    private final InferenceService service;
    private final ObjectMapper json;
    private final ServerMetadata serverMetadata;
    private final RequestBodies bodies;
    private final InferenceObserver observer;
    private final DecodingBudget decoding;
    private final int maxBodyBytes;

    public InferenceHandler(ModelRegistry registry, RequestDecoder decoder, InferenceService service, ObjectMapper json,
                            String serverVersion, int maxBodyBytes) {
        this(registry, decoder, service, json, serverVersion, maxBodyBytes, InferenceObserver.NONE,
                new DecodingBudget(Long.MAX_VALUE));
    }

    /**
     * @param decoding bytes of bodies read and decoded at once; an infer request that does not fit gets 503
     */
    public InferenceHandler(ModelRegistry registry, RequestDecoder decoder, InferenceService service, ObjectMapper json,
                            String serverVersion, int maxBodyBytes, InferenceObserver observer, DecodingBudget decoding) {
        this.observer = observer;
        this.decoding = decoding;
        this.registry = registry;
        this.decoder = decoder;
        this.service = service;
        this.json = json;
        this.serverMetadata = new ServerMetadata("gpupool", serverVersion, List.of("binary_tensor_data", "classification"));
        this.bodies = new RequestBodies(maxBodyBytes);
        this.maxBodyBytes = maxBodyBytes;
    }

    /** GET /v2/health/live: 200 {@code {"live": true}} while the process can answer. */
    public Mono<ServerResponse> live(ServerRequest request) {
        return ServerResponse.ok().contentType(MediaType.APPLICATION_JSON).bodyValue(Health.LIVE);
    }

    /**
     * GET /v2/health/ready: 200 {@code {"ready": true}} once every model finished its warm-up; before,
     * 503 {@code {"ready": false, "error": why}}, so both a client that reads the flag and one that
     * reads the error message understand it.
     */
    public Mono<ServerResponse> ready(ServerRequest request) {
        if (registry.isWarmedUp()) {
            return ServerResponse.ok().contentType(MediaType.APPLICATION_JSON).bodyValue(Health.READY);
        }
        return ServerResponse.status(503).contentType(MediaType.APPLICATION_JSON)
                .header(HttpHeaders.RETRY_AFTER, "1")
                .bodyValue(Health.notReady("server is not ready: model warm-up has not finished"));
    }

    /** GET /v2: server name, version and extensions: the core's own, then {@code extensions}. */
    public Mono<ServerResponse> serverMetadata(ServerRequest request, List<String> extensions) {
        List<String> all = new ArrayList<>(serverMetadata.extensions());
        all.addAll(extensions);
        return ServerResponse.ok().contentType(MediaType.APPLICATION_JSON)
                .bodyValue(new ServerMetadata(serverMetadata.name(), serverMetadata.version(), all));
    }

    /** GET /v2/models/{model}[/versions/{version}]. */
    public Mono<ServerResponse> modelMetadata(ServerRequest request) {
        return Mono.defer(() -> {
            ServedModel model = find(request);
            ModelMetadata metadata = new ModelMetadata(model.name(), List.of(model.version()), model.platform(),
                    tensors(model.inputs()), tensors(model.outputs()));
            return ServerResponse.ok().contentType(MediaType.APPLICATION_JSON).bodyValue(metadata);
        }).onErrorResume(this::error);
    }

    /**
     * GET /v2/models/{model}[/versions/{version}]/ready: 200 {@code {"name": m, "ready": true}} when ready,
     * 503 {@code {"name": m, "ready": false, "error": why}} while warming up or unavailable.
     */
    public Mono<ServerResponse> modelReady(ServerRequest request) {
        return Mono.defer(() -> {
            ServedModel model = find(request);
            try {
                requireReady(model);
            } catch (ServingException notReady) {
                ServerResponse.BodyBuilder builder = ServerResponse.status(notReady.status())
                        .contentType(MediaType.APPLICATION_JSON);
                if (notReady.retryAfterSeconds() > 0) {
                    builder.header(HttpHeaders.RETRY_AFTER, Long.toString(notReady.retryAfterSeconds()));
                }
                return builder.bodyValue(new Health.ModelReadiness(model.name(), false, notReady.getMessage()));
            }
            return ServerResponse.ok().contentType(MediaType.APPLICATION_JSON)
                    .bodyValue(new Health.ModelReadiness(model.name(), true, null));
        }).onErrorResume(this::error);
    }

    /** POST /v2/models/{model}[/versions/{version}]/infer. */
    public Mono<ServerResponse> infer(ServerRequest request) {
        // Set once the request is queued; failures before that are reported here, later ones by the service.
        boolean[] queued = {false};
        // A client that goes away mid-upload shows either as a failed read (onErrorResume) or, when the
        // server notices the closed connection first, as a cancelled subscription: count it once either way.
        AtomicBoolean reported = new AtomicBoolean();
        return Mono.defer(() -> {
            ServedModel model;
            try {
                model = find(request);
                requireReady(model);
            } catch (ServingException refused) {
                // Read and drop the body before answering: a refusal sent while the request's bytes are
                // still arriving left them on the kept-alive connection, and the client's next request
                // on it hung (found by the load driver's malformed corpus: unknown model, then any request).
                return discard(request).then(Mono.<ServerResponse>error(refused));
            }
            String headerLength = request.headers().firstHeader(HEADER_LENGTH);
            // What the body takes of the decoding budget (DecodingBudget): its declared length at once, else each
            // part as it arrives; then what decoding an encoded body added.
            long declared = request.headers().contentLength().orElse(-1);
            DecodingBudget.Hold hold = decoding.hold();
            if (declared >= 0 && !hold.take(Math.min(declared, maxBodyBytes))) {
                return discard(request).then(Mono.<ServerResponse>error(decoding.exhausted()));
            }
            return bodies.read(request, declared >= 0 ? null : hold)
                    .publishOn(Schedulers.boundedElastic())
                    .map(body -> {
                        if (!hold.cover(body.length)) {
                            throw decoding.exhausted();
                        }
                        // the model as served now: a reload while the body arrived replaced the one found above
                        ServedModel current = find(request);
                        if (current != model) {
                            requireReady(current);
                        }
                        return decoder.decode(current, body, headerLength);
                    })
                    .doFinally(signal -> hold.close())
                    .flatMap(validated -> {
                        queued[0] = true;
                        long submitted = System.nanoTime();
                        return service.infer(validated)
                                .onErrorResume(failure -> onReplacement(validated, failure, submitted));
                    })
                    .flatMap(InferenceHandler::respond);
        }).onErrorResume(failure -> {
            boolean cancelled = ErrorStatus.clientWentAway(failure);
            if (!queued[0] && reported.compareAndSet(false, true)) {
                observer.rejected(servedName(request), cancelled ? InferenceObserver.CANCELLED : ErrorStatus.of(failure));
            }
            return error(failure); // nothing is answered to a client gone (ErrorResponses)
        }).doOnCancel(() -> {
            if (!queued[0] && reported.compareAndSet(false, true)) {
                observer.rejected(servedName(request), InferenceObserver.CANCELLED);
            }
        });
    }

    /** The request's model name when it is one this server serves, else null (metrics must not take any name). */
    private String servedName(ServerRequest request) {
        String name = request.pathVariable("model");
        return registry.served(name) != null ? name : null;
    }

    /** POST /v2/repository/index: every model found, with its state; {@code {"ready": true}} keeps ready ones. */
    public Mono<ServerResponse> repositoryIndex(ServerRequest request) {
        return body(request).map(body -> {
            boolean readyOnly = false;
            if (body.length > 0) {
                JsonNode node = RepositoryHandler.jsonObject(json, body, "repository index request", "{\"ready\": true}");
                JsonNode ready = node.get("ready");
                if (ready != null && !ready.isNull()) {
                    if (!ready.isBoolean()) {
                        throw ServingException.badRequest("'ready' must be true or false, was " + ready);
                    }
                    readyOnly = ready.booleanValue();
                }
            }
            List<RepositoryIndexEntry> entries = new ArrayList<>();
            for (ServedModel model : registry.models()) {
                if (!readyOnly || model.isReady()) {
                    entries.add(new RepositoryIndexEntry(model.name(), model.version(), model.state(),
                            model.failureReason()));
                }
            }
            if (!readyOnly) {
                for (ModelFailure failure : registry.failures()) {
                    entries.add(new RepositoryIndexEntry(failure.name(), failure.version(), "UNAVAILABLE", failure.reason()));
                }
            }
            return entries;
        }).flatMap(entries -> ServerResponse.ok().contentType(MediaType.APPLICATION_JSON).bodyValue(entries))
                .onErrorResume(this::error);
    }

    /** A path of ours with a method it does not take: 405 naming the allowed ones. */
    public Mono<ServerResponse> wrongMethod(ServerRequest request, String allowed) {
        return discard(request).then(error(ServingException.methodNotAllowed(request.method().name(), request.path(),
                allowed)));
    }

    /** Any other path: 404 naming it, and where the API is when the path lies outside it (a client's wrong root). */
    public Mono<ServerResponse> noSuchEndpoint(ServerRequest request) {
        String hint = request.path().startsWith("/v2/") || request.path().equals("/v2") ? ""
                : " (the inference API is under /v2, as KServe v2 and Triton serve it)";
        // read the body first, as for a refused model, so a kept-alive connection is left clean
        return discard(request).then(error(ServingException.notFound("no endpoint " + request.method() + " "
                + Shown.clip(request.path()) + hint))).onErrorResume(this::error);
    }

    /** The model named in the path, at the version in the path when there is one. */
    private ServedModel find(ServerRequest request) {
        return registry.find(request.pathVariable("model"), request.pathVariables().get("version"));
    }

    /**
     * A request refused because its model began unloading while it waited for a stream runs once more on the model
     * that replaced it (a reload: POST .../load of a served model), when that one takes the same requests; nothing
     * else is retried. The first attempt stays counted as refused in the metrics: it was. The second gets what is left
     * of the request's timeout since it was first submitted ({@code submittedNanos}), so that a client's deadline holds
     * across the two; its 504 names the request's whole timeout, not what was left.
     */
    private Mono<EncodedResponse> onReplacement(ValidatedRequest request, Throwable failure, long submittedNanos) {
        ServedModel was = request.model();
        ServedModel now = failure instanceof ServingException refused && refused.status() == 503 && was.isUnloading()
                ? registry.served(was.name()) : null;
        if (now == null || now == was || !now.isReady() || !now.takesRequestsOf(was)) {
            return Mono.error(failure);
        }
        Duration left = request.timeout().minusNanos(System.nanoTime() - submittedNanos);
        if (!left.isPositive()) {
            return Mono.error(ServingException.timedOut(request.timeout()));
        }
        return service.infer(request.on(now, left)).onErrorMap(
                again -> again instanceof ServingException late && late.status() == 504,
                again -> ServingException.timedOut(request.timeout()));
    }

    private static void requireReady(ServedModel model) {
        if (model.isReady()) {
            return;
        }
        if (model.isUnloading()) {
            throw ServingException.beingUnloaded(model.name());
        }
        if (model.failureReason() != null) {
            throw ServingException.unavailable("model '" + model.name() + "' is unavailable: " + model.failureReason(), 0);
        }
        throw ServingException.unavailable("model '" + model.name() + "' is not ready: warm-up has not finished", 1);
    }

    /**
     * Reads the body to its end and releases it, so nothing is left on a kept-alive connection; past
     * {@code max-body-size} it stops with 413 (the connection is then closed), so that a refused request
     * cannot make the server read an unbounded body either.
     */
    private Mono<Void> discard(ServerRequest request) {
        return RequestBodies.discard(request, maxBodyBytes);
    }

    /** The whole body, decoded (see {@link RequestBodies}). */
    private Mono<byte[]> body(ServerRequest request) {
        return bodies.read(request);
    }

    private static Mono<ServerResponse> respond(EncodedResponse response) {
        if (!response.hasBinary()) {
            return ServerResponse.ok().contentType(MediaType.APPLICATION_JSON).bodyValue(response.body());
        }
        return ServerResponse.ok().contentType(MediaType.APPLICATION_OCTET_STREAM)
                .header(HEADER_LENGTH, Integer.toString(response.jsonLength()))
                .bodyValue(response.body());
    }

    private static List<ModelMetadata.MetadataTensor> tensors(List<TensorSpec> specs) {
        return specs.stream().map(spec -> new ModelMetadata.MetadataTensor(spec.name(), spec.dataType().protocolName(),
                spec.shape())).toList();
    }

    /** The answer for a failure (see {@link ErrorResponses#of}). */
    Mono<ServerResponse> error(Throwable failure) {
        return ErrorResponses.of(failure);
    }
}
