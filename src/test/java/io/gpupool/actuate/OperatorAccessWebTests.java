package io.gpupool.actuate;

import io.gpupool.WebTestClients;

import java.net.URI;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpupool.actuate.security.LoginThrottle;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.system.CapturedOutput;
import org.springframework.boot.test.system.OutputCaptureExtension;
import org.springframework.boot.test.web.server.LocalManagementPort;
import org.springframework.test.web.reactive.server.WebTestClient;

/**
 * Who may read what on the management port, and what an operator login costs a guesser: throttled per
 * client, logged, the same answer for an unknown user as for a wrong password.
 */
@SpringBootTest(classes = OperationsTestApplication.class, webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT,
        properties = {"management.server.port=0", "gpupool.security.operator-password=s3cret"})
@ExtendWith(OutputCaptureExtension.class)
class OperatorAccessWebTests {

    @LocalManagementPort
    int managementPort;

    @Autowired
    LoginThrottle throttle;

    WebTestClient management;

    @BeforeEach
    void client() {
        throttle.succeeded("127.0.0.1");
        management = WebTestClients.to("http://localhost:" + managementPort + "/actuator");
    }

    @Test
    void headOnTheReadableEndpointsAnswersAsGetDoes() {
        for (String path : new String[]{"/health", "/health/readiness", "/prometheus", "/gpupool", "/dashboard"}) {
            management.head().uri(path).exchange().expectStatus().isOk().expectBody().isEmpty();
        }
        management.head().uri("/env").exchange().expectStatus().isUnauthorized();
    }

    @Test
    void anonymousHealthDoesNotShowTheDiskPath() {
        String health = management.get().uri("/health").exchange().expectStatus().isOk()
                .expectBody(String.class).returnResult().getResponseBody();
        assertThat(health).doesNotContain("\"path\"").doesNotContain(System.getProperty("user.dir"));
    }

    @Test
    void theTraceDownloadNeedsTheOperator() {
        management.get().uri("/gpupool/cuda:0/trace").exchange().expectStatus().isUnauthorized();
        management.get().uri("/gpupool/cuda:0/trace").headers(h -> h.setBasicAuth("operator", "s3cret")).exchange()
                .expectStatus().isOk();
    }

    /**
     * The actuator decodes the path and takes query parameters over the path's selectors, so the trace can be asked
     * for without "/trace" in the path as sent: each such way needs the operator too, and only the figures and the
     * layout, asked for plainly, are open.
     */
    @Test
    void theTraceAskedForAnyOtherWayNeedsTheOperatorToo() {
        String base = "http://localhost:" + managementPort + "/actuator/gpupool/cuda:0";
        for (String disguised : new String[] {"/%74race", "/tr%61ce?addresses=raw", "/layout?section=trace",
                "/layout?section=trace&addresses=raw", "?section=trace"}) {
            assertThat(management.get().uri(URI.create(base + disguised)).exchange().returnResult(String.class)
                    .getStatus().value()).as(disguised).isEqualTo(401);
        }
        for (String open : new String[] {"", "/layout"}) {
            assertThat(management.get().uri(URI.create(base + open)).exchange().returnResult(String.class)
                    .getStatus().value()).as(open).isEqualTo(200);
        }
        management.get().uri(URI.create("http://localhost:" + managementPort + "/actuator/gpupool")).exchange()
                .expectStatus().isOk();
        management.get().uri(URI.create(base + "/layout?device=cuda:1")).exchange().expectStatus().isUnauthorized();
    }

    @Test
    void anUnknownUserGetsTheAnswerAWrongPasswordGets() {
        WebTestClient.ResponseSpec unknown = management.delete().uri("/gpupool")
                .headers(h -> h.setBasicAuth("nobody", "s3cret")).exchange();
        WebTestClient.ResponseSpec wrong = management.delete().uri("/gpupool")
                .headers(h -> h.setBasicAuth("operator", "wrong")).exchange();
        unknown.expectStatus().isUnauthorized().expectBody().isEmpty();
        wrong.expectStatus().isUnauthorized().expectBody().isEmpty();
    }

    @Test
    void repeatedFailuresAreLoggedAndThrottledThenTheClientWaits(CapturedOutput output) {
        for (int i = 1; i <= 5; i++) {
            management.delete().uri("/gpupool").headers(h -> h.setBasicAuth("operator", "guess")).exchange()
                    .expectStatus().isUnauthorized();
        }
        assertThat(output).contains("Operator login failed from 127.0.0.1")
                .contains("(1 in a row)").contains("(5 in a row); further attempts from it are refused");
        // blocked: even the right password is not checked until the wait is over
        management.delete().uri("/gpupool").headers(h -> h.setBasicAuth("operator", "s3cret")).exchange()
                .expectStatus().isEqualTo(429).expectHeader().exists("Retry-After");
        // anonymous reads are not affected by a blocked login
        management.get().uri("/gpupool").exchange().expectStatus().isOk();
        throttle.succeeded("127.0.0.1");
        management.delete().uri("/gpupool").headers(h -> h.setBasicAuth("operator", "s3cret")).exchange()
                .expectStatus().isOk();
    }
}
