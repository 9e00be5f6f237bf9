package io.gpupool.serving;

import org.springframework.http.HttpHeaders;
import org.springframework.http.HttpMethod;
import org.springframework.web.reactive.function.server.HandlerFunction;
import org.springframework.web.reactive.function.server.RequestPredicate;
import org.springframework.web.reactive.function.server.RequestPredicates;
import org.springframework.web.reactive.function.server.RouterFunction;
import org.springframework.web.reactive.function.server.RouterFunctions;
import org.springframework.web.reactive.function.server.ServerRequest;
import org.springframework.web.reactive.function.server.ServerResponse;
import reactor.core.publisher.Mono;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Collectors;

import static org.springframework.web.reactive.function.server.RequestPredicates.path;

/**
 * The URL map of the Open Inference Protocol REST API and the Triton extensions we implement.
 *
 * <p>Every path answers, besides its own methods: HEAD where it has GET (the GET answer without its
 * body), OPTIONS (204 with {@code Allow}), and any other method with 405 and {@code Allow}. Paths are
 * matched in the order listed, so a literal segment ({@code /v2/models/stats}) comes before the
 * variable one ({@code /v2/models/{model}}) it would otherwise match.
 */
public final class ServingRoutes {

    private ServingRoutes() {
    }

    public static RouterFunction<ServerResponse> routes(InferenceHandler handler, ProtocolExtensions extensions) {
        Table table = new Table();
        table.get("/v2/health/live", handler::live);
        table.get("/v2/health/ready", handler::ready);
        List<String> extensionNames = extensions.names();
        table.get("/v2", request -> handler.serverMetadata(request, extensionNames));
        table.get("/v2/", request -> handler.serverMetadata(request, extensionNames));
        table.get("/v2/models/stats", extensions.statistics()::all);
        table.get("/v2/models/{model}", handler::modelMetadata);
        table.get("/v2/models/{model}/versions/{version}", handler::modelMetadata);
        table.get("/v2/models/{model}/ready", handler::modelReady);
        table.get("/v2/models/{model}/versions/{version}/ready", handler::modelReady);
        table.get("/v2/models/{model}/config", extensions.configuration()::config);
        table.get("/v2/models/{model}/versions/{version}/config", extensions.configuration()::config);
        table.get("/v2/models/{model}/stats", extensions.statistics()::one);
        table.get("/v2/models/{model}/versions/{version}/stats", extensions.statistics()::one);
        table.post("/v2/models/{model}/infer", handler::infer);
        table.post("/v2/models/{model}/versions/{version}/infer", handler::infer);
        table.post("/v2/repository/index", handler::repositoryIndex);
        table.post("/v2/repository/models/{model}/load", extensions.repository()::load);
        table.post("/v2/repository/models/{model}/unload", extensions.repository()::unload);
        for (String kind : List.of("systemsharedmemory", "cudasharedmemory")) {
            SharedMemoryHandler memory = extensions.sharedMemory();
            table.get("/v2/" + kind + "/status", memory::status);
            table.get("/v2/" + kind + "/region/{region}/status", memory::regionStatus);
            table.post("/v2/" + kind + "/region/{region}/register", memory::register);
            table.post("/v2/" + kind + "/unregister", memory::unregister);
            table.post("/v2/" + kind + "/region/{region}/unregister", memory::unregister);
        }
        return table.build(handler);
    }

    /** Paths in match order, each with its handlers by method. */
    private static final class Table {

        private final Map<String, Map<HttpMethod, HandlerFunction<ServerResponse>>> paths = new LinkedHashMap<>();

        void get(String pattern, HandlerFunction<ServerResponse> handler) {
            paths.computeIfAbsent(pattern, p -> new LinkedHashMap<>()).put(HttpMethod.GET, handler);
        }

        void post(String pattern, HandlerFunction<ServerResponse> handler) {
            paths.computeIfAbsent(pattern, p -> new LinkedHashMap<>()).put(HttpMethod.POST, handler);
        }

        /**
         * One router over every route, tried in order on the calling thread: the first whose predicate holds
         * answers, as {@code and}-composed routes would, but without a reactive step per route tried (composed,
         * each route is a concatenated Mono, and an inference request passes some forty before its own).
         */
        RouterFunction<ServerResponse> build(InferenceHandler handler) {
            List<Route> routes = new ArrayList<>();
            paths.forEach((pattern, methods) -> {
                String allow = allowed(methods.keySet());
                methods.forEach((method, function) -> {
                    routes.add(new Route(RequestPredicates.method(method).and(path(pattern)), function));
                    if (method == HttpMethod.GET) {
                        // WebFlux drops the body of a HEAD answer and keeps its headers.
                        routes.add(new Route(RequestPredicates.method(HttpMethod.HEAD).and(path(pattern)), function));
                    }
                });
                routes.add(new Route(RequestPredicates.method(HttpMethod.OPTIONS).and(path(pattern)),
                        request -> ServerResponse.noContent().header(HttpHeaders.ALLOW, allow).build()));
                routes.add(new Route(path(pattern), request -> handler.wrongMethod(request, allow)));
            });
            routes.add(new Route(path("/**"), handler::noSuchEndpoint));   // any other path, outside /v2 too: JSON 404
            return new InOrder(List.copyOf(routes));
        }

        /** A predicate and the handler that answers when it holds. */
        private record Route(RequestPredicate predicate, HandlerFunction<ServerResponse> handler) {
        }

        /** The routes, tried in order; visitors (the actuator's mappings) see each route as composed ones would. */
        private record InOrder(List<Route> routes) implements RouterFunction<ServerResponse> {

            @Override
            public Mono<HandlerFunction<ServerResponse>> route(ServerRequest request) {
                for (Route route : routes) {
                    if (route.predicate().test(request)) {         // a path predicate binds its variables here
                        return Mono.just(route.handler());
                    }
                }
                return Mono.empty();
            }

            @Override
            public void accept(RouterFunctions.Visitor visitor) {
                routes.forEach(route -> visitor.route(route.predicate(), route.handler()));
            }
        }

        private static String allowed(java.util.Set<HttpMethod> methods) {
            List<HttpMethod> all = new ArrayList<>(methods);
            if (methods.contains(HttpMethod.GET)) {
                all.add(HttpMethod.HEAD);
            }
            all.add(HttpMethod.OPTIONS);
            return all.stream().map(HttpMethod::name).collect(Collectors.joining(", "));
        }
    }
}
