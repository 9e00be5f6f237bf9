package io.gpupool.serving;

import io.gpupool.serving.protocol.ErrorBody;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.http.HttpHeaders;
import org.springframework.http.MediaType;
import org.springframework.web.reactive.function.server.ServerResponse;
import reactor.core.publisher.Mono;

/** The one way every endpoint under /v2 answers a failure: {@code {"error": "..."}} with its status. */
final class ErrorResponses {

    private static final Logger log = LoggerFactory.getLogger(InferenceHandler.class);

    private ErrorResponses() {
    }

    /**
     * The answer for a failure, with the status {@link ErrorStatus} decides; 503 carries Retry-After,
     * 405 its Allow header; a 500 is a bug and is logged with its stack trace.
     */
    static Mono<ServerResponse> of(Throwable failure) {
        if (ErrorStatus.clientWentAway(failure)) {
            // the connection is gone (closed by the client, or by the server's body-read deadline, which has
            // answered 408): no answer can reach anyone, and the client's leaving is no server error
            return Mono.empty();
        }
        int status = ErrorStatus.of(failure);
        String message;
        long retryAfter = 0;
        String allow = null;
        if (failure instanceof ServingException serving) {
            message = serving.getMessage();
            retryAfter = serving.retryAfterSeconds();
            allow = serving.allow();
        } else if (status == 507) {
            message = "out of device memory: " + failure.getMessage();
            log.warn("Inference failed for lack of device memory: {}", failure.getMessage());
        } else {
            message = "internal error: " + failure;
            log.error("Inference request failed with an unexpected error", failure);
        }
        ServerResponse.BodyBuilder builder = ServerResponse.status(status).contentType(MediaType.APPLICATION_JSON);
        if (retryAfter > 0) {
            builder.header(HttpHeaders.RETRY_AFTER, Long.toString(retryAfter));
        }
        if (allow != null) {
            builder.header(HttpHeaders.ALLOW, allow);
        }
        if (status == 413) {
            // the client may keep sending; a new connection is the clean state for its next request
            builder.header(HttpHeaders.CONNECTION, "close");
        }
        return builder.bodyValue(new ErrorBody(message));
    }
}
