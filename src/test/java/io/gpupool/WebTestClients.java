package io.gpupool;

import java.time.Duration;

import org.springframework.core.io.buffer.DataBuffer;
import org.springframework.core.io.buffer.DataBufferUtils;
import org.springframework.core.io.buffer.DefaultDataBufferFactory;
import org.springframework.test.web.reactive.server.WebTestClient;
import org.springframework.web.reactive.function.client.ClientResponse;
import org.springframework.web.reactive.function.client.ExchangeFilterFunction;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * WebTestClients for a test's real server that behave like a well-mannered keep-alive client.
 *
 * <p>A WebTestClient reads a response's body only when the test asks for it, and a connection whose
 * body was never read is never handed back to the client's pool: a test that checks only the status
 * of a few dozen answers with bodies leaves as many connections open, and the server's connection
 * limit (which the test applications keep, as production does) answers 503 to the next. So every
 * response is read whole before the test sees it, and its connection goes back to the pool at once.
 * The answer timeout is 30 s rather than WebTestClient's 5 s, for CI's two shared cores.
 */
public final class WebTestClients {

    private static final Duration ANSWER_TIMEOUT = Duration.ofSeconds(30);

    private WebTestClients() {
    }

    /** A client for {@code baseUrl} (for example {@code http://localhost:8081/actuator}). */
    public static WebTestClient to(String baseUrl) {
        return to(baseUrl, ANSWER_TIMEOUT);
    }

    /** A client for {@code baseUrl} that waits {@code answerTimeout} for each answer. */
    public static WebTestClient to(String baseUrl, Duration answerTimeout) {
        return WebTestClient.bindToServer().responseTimeout(answerTimeout).baseUrl(baseUrl)
                .filter(readWholeBody()).build();
    }

    private static ExchangeFilterFunction readWholeBody() {
        return (request, next) -> next.exchange(request).flatMap(response ->
                DataBufferUtils.join(response.bodyToFlux(DataBuffer.class))
                        .map(body -> withBody(response, Flux.just(onHeap(body))))
                        .switchIfEmpty(Mono.fromSupplier(() -> withBody(response, Flux.empty()))));
    }

    /** A copy on the heap, the network's buffer released: a test that never reads the body leaks nothing. */
    private static DataBuffer onHeap(DataBuffer received) {
        byte[] bytes = new byte[received.readableByteCount()];
        received.read(bytes);
        DataBufferUtils.release(received);
        return DefaultDataBufferFactory.sharedInstance.wrap(bytes);
    }

    /** The same answer over a body already read (a mutated response would drain the original again). */
    private static ClientResponse withBody(ClientResponse response, Flux<DataBuffer> body) {
        return ClientResponse.create(response.statusCode(), response.strategies())
                .headers(headers -> headers.addAll(response.headers().asHttpHeaders()))
                .cookies(cookies -> cookies.addAll(response.cookies()))
                .request(response.request())
                .body(body)
                .build();
    }
}
