package io.gpupool.serving;

import org.springframework.web.reactive.function.server.RouterFunction;
import org.springframework.web.reactive.function.server.ServerResponse;

import static org.springframework.web.reactive.function.server.RequestPredicates.GET;
import static org.springframework.web.reactive.function.server.RequestPredicates.POST;
import static org.springframework.web.reactive.function.server.RequestPredicates.path;
import static org.springframework.web.reactive.function.server.RouterFunctions.route;

/** The URL map of the Open Inference Protocol REST API. */
public final class ServingRoutes {

    private ServingRoutes() {
    }

    public static RouterFunction<ServerResponse> routes(InferenceHandler handler) {
        return route(GET("/v2/health/live"), handler::live)
                .andRoute(GET("/v2/health/ready"), handler::ready)
                .andRoute(GET("/v2").or(GET("/v2/")), handler::serverMetadata)
                .andRoute(GET("/v2/models/{model}"), handler::modelMetadata)
                .andRoute(GET("/v2/models/{model}/versions/{version}"), handler::modelMetadata)
                .andRoute(GET("/v2/models/{model}/ready"), handler::modelReady)
                .andRoute(GET("/v2/models/{model}/versions/{version}/ready"), handler::modelReady)
                .andRoute(POST("/v2/models/{model}/infer"), handler::infer)
                .andRoute(POST("/v2/models/{model}/versions/{version}/infer"), handler::infer)
                .andRoute(POST("/v2/repository/index"), handler::repositoryIndex)
                .andRoute(path("/v2/**"), handler::noSuchEndpoint);
    }
}
