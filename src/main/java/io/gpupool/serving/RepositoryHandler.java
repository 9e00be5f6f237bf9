package io.gpupool.serving;

import io.gpupool.model.InferenceModel;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.web.reactive.function.server.ServerRequest;
import org.springframework.web.reactive.function.server.ServerResponse;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Schedulers;
import tools.jackson.core.JacksonException;
import tools.jackson.core.StreamReadFeature;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.ObjectMapper;

import java.util.Locale;
import java.util.function.Consumer;

/**
 * Triton's model repository extension: {@code POST /v2/repository/models/{m}/load} and {@code /unload}.
 * Off unless {@code gpupool.models.control=explicit} (then 403 naming the property); when on, any client
 * of the inference port may call them, as with Triton's explicit model control.
 *
 * <pre>
 *   load m:    read folder m on every device ──► dry run at the largest size ──► serve m
 *                 │ fails: 400 with the reason, nothing stays allocated; a served m keeps serving, else the
 *                 │        index lists m UNAVAILABLE with the reason
 *              a model m already served is then unloaded as below (Triton's reload)
 *   unload m:  new requests for m get 503 ──► wait until no request uses a replica ──► stop serving m
 *              ──► close the replicas (weights back to the devices) ──► index: m UNAVAILABLE, "unloaded"
 * </pre>
 * Changes are made one at a time (one lock), off the event loop, since loading reads files and
 * uploads weights.
 */
public final class RepositoryHandler {

    private static final Logger log = LoggerFactory.getLogger(RepositoryHandler.class);

    private final ModelRegistry registry;
    private final ModelLoader loader;
    private final Consumer<ServedModel> dryRun;
    private final Consumer<String> loaded;
    private final boolean enabled;
    private final ObjectMapper json;
    private final RequestBodies bodies;
    private final Object changes = new Object();

    /**
     * @param dryRun  runs a freshly loaded model once per device at its largest size, throwing if it fails
     * @param loaded  told the name of every model that starts serving (the meters add it)
     * @param enabled {@code gpupool.models.control=explicit}
     */
    public RepositoryHandler(ModelRegistry registry, ModelLoader loader, Consumer<ServedModel> dryRun,
                             Consumer<String> loaded, boolean enabled, ObjectMapper json, int maxBodyBytes) {
        this.registry = registry;
        this.loader = loader;
        this.dryRun = dryRun;
        this.loaded = loaded;
        this.enabled = enabled;
        this.json = json;
        this.bodies = new RequestBodies(maxBodyBytes);
    }

    /** True when {@code gpupool.models.control=explicit}. */
    public boolean enabled() {
        return enabled;
    }

    /** POST /v2/repository/models/{m}/load. */
    public Mono<ServerResponse> load(ServerRequest request) {
        return change(request, name -> {
            ServedModel fresh;
            try {
                fresh = loader.load(name);
            } catch (ServingException e) {
                if (e.status() == 400) {                           // a folder that does not load; 404: no folder
                    String prefix = "model '" + name + "' failed to load: ";
                    String message = e.getMessage();
                    registry.failedToLoad(new ModelFailure(name, "",
                            message.startsWith(prefix) ? message.substring(prefix.length()) : message));
                }
                throw e;
            }
            try {
                dryRun.accept(fresh);
            } catch (RuntimeException e) {
                close(fresh);
                ServingException refused = ServingException.badRequest("model '" + name
                        + "' failed its warm-up and is not served: " + e.getMessage());
                registry.failedToLoad(new ModelFailure(name, fresh.version(), "its warm-up failed: " + e.getMessage()));
                throw refused;
            }
            fresh.markReady();
            ServedModel previous = registry.serve(fresh);
            if (previous != null) {
                drain(previous);
                close(previous);
            }
            loaded.accept(name);
            log.info("Model '{}' loaded on request{}", name, previous == null ? "" : " (replacing the loaded one)");
        });
    }

    /** POST /v2/repository/models/{m}/unload. */
    public Mono<ServerResponse> unload(ServerRequest request) {
        return change(request, name -> {
            ServedModel model = registry.find(name, null);
            drain(model);
            registry.withdraw(model, "unloaded on request (POST /v2/repository/models/" + name + "/unload)");
            close(model);
            log.info("Model '{}' unloaded on request", name);
        });
    }

    private Mono<ServerResponse> change(ServerRequest request, Consumer<String> change) {
        String name = request.pathVariable("model");
        return bodies.read(request).publishOn(Schedulers.boundedElastic()).map(body -> {
            if (!enabled) {
                throw ServingException.forbidden("loading and unloading models is off: start the server with "
                        + "gpupool.models.control=explicit to allow it");
            }
            if (!ModelRegistry.isSafeName(name)) {
                registry.find(name, null);   // the registry's 400 naming the bad name
            }
            rejectOverrides(body);
            synchronized (changes) {
                change.accept(name);
            }
            return name;
        }).flatMap(done -> ServerResponse.ok().build()).onErrorResume(ErrorResponses::of);
    }

    /** Triton's load may carry a configuration or files to use instead of the folder's: not offered. */
    private void rejectOverrides(byte[] body) {
        if (body.length == 0) {
            return;
        }
        JsonNode node = jsonObject(json, body, "repository request", "{\"parameters\": {}}");
        JsonNode parameters = node.get("parameters");
        if (parameters != null && !parameters.isObject()) {
            throw ServingException.badRequest("'parameters' of a repository request must be a JSON object, not "
                    + kindOf(parameters));
        }
        if (parameters != null) {
            for (String key : parameters.propertyNames()) {
                if (key.equals("config") || key.startsWith("file:")) {
                    throw ServingException.badRequest("parameter '" + key + "' is not supported: models load from "
                            + "their folder in the repository as they are");
                }
            }
        }
    }

    /**
     * A repository body read strictly (a key given twice refused) as the one JSON object it must be; {@code what}
     * and {@code example} name it in the 400 otherwise.
     */
    static JsonNode jsonObject(ObjectMapper json, byte[] body, String what, String example) {
        JsonNode node;
        try {
            node = json.reader().with(StreamReadFeature.STRICT_DUPLICATE_DETECTION).readTree(body);
        } catch (JacksonException e) {
            throw ServingException.badRequest("malformed " + what + " JSON: " + e.getOriginalMessage());
        }
        if (node == null || !node.isObject()) {
            throw ServingException.badRequest("a " + what + " body must be one JSON object (for example " + example
                    + "), not " + (node == null ? "empty" : kindOf(node)));
        }
        return node;
    }

    /** What a JSON value is, as a message names it ("array", "string", "number"). */
    private static String kindOf(JsonNode node) {
        return node.getNodeType().name().toLowerCase(Locale.ROOT);
    }

    /** Stops new requests for {@code model} and waits for those using a replica to finish. */
    private static void drain(ServedModel model) {
        model.beginUnload();
        while (model.running() > 0) {
            try {
                Thread.sleep(5);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw ServingException.unavailable("interrupted while waiting for model '" + model.name()
                        + "' to finish its requests", 1);
            }
        }
    }

    private static void close(ServedModel model) {
        for (InferenceModel replica : model.replicas().values()) {
            try {
                replica.close();
            } catch (RuntimeException e) {
                log.warn("Closing a replica of model '{}' failed: {}", model.name(), e.getMessage());
            }
        }
        model.statistics().weightsLoaded(0);
    }
}
