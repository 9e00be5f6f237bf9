package io.gpupool.actuate;

import java.time.Duration;
import java.util.concurrent.atomic.AtomicBoolean;

import io.gpupool.WebTestClients;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.web.server.LocalManagementPort;
import org.springframework.test.web.reactive.server.WebTestClient;

/**
 * A monitoring client on one kept-alive connection pool gets every answer, whatever mix of open reads,
 * refusals and operator requests it sends: the management port keeps reading a connection after each
 * exchange ({@code KeepAliveReadResume}) and a well-mannered client never runs into its connection limit.
 * Without the read resume this sequence stalled within a few thousand requests on the host (the next
 * request on the connection was never read); a stall is a matter of timing, so the test runs long enough
 * to catch it in most runs rather than in every one.
 */
@SpringBootTest(classes = OperationsTestApplication.class, webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT,
        properties = {"management.server.port=0", "gpupool.security.operator-password=s3cret"})
class ManagementKeepAliveWebTests {

    /** Seven requests a round: a stalled connection shows as one answer not coming within the timeout. */
    private static final int ROUNDS = 1_500;

    @LocalManagementPort
    int managementPort;

    @Autowired
    AtomicBoolean modelsWarmedUp;

    @Test
    void thousandsOfKeptAliveRequestsInARowAreAllAnswered() {
        modelsWarmedUp.set(true);
        WebTestClient management = WebTestClients.to("http://localhost:" + managementPort + "/actuator",
                Duration.ofSeconds(10));
        for (int round = 0; round < ROUNDS; round++) {
            management.get().uri("/health").exchange().expectStatus().isOk();
            management.get().uri("/metrics").exchange().expectStatus().isOk();
            management.get().uri("/prometheus").exchange().expectStatus().isOk();
            management.get().uri("/dashboard").exchange().expectStatus().isOk();
            management.get().uri("/env").exchange().expectStatus().isUnauthorized();
            management.get().uri("/env").headers(h -> h.setBasicAuth("operator", "s3cret")).exchange()
                    .expectStatus().isForbidden();
            management.get().uri("/gpupool/cuda:0").exchange().expectStatus().isOk();
        }
    }
}
