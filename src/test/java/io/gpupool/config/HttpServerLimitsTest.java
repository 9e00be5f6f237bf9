package io.gpupool.config;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

import io.gpupool.GpuPoolApplication;
import io.gpupool.serving.ModelRegistry;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.context.TypeExcludeFilter;
import org.springframework.boot.context.properties.ConfigurationPropertiesScan;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.system.CapturedOutput;
import org.springframework.boot.test.system.OutputCaptureExtension;
import org.springframework.boot.test.web.server.LocalManagementPort;
import org.springframework.boot.test.web.server.LocalServerPort;
import org.springframework.context.annotation.ComponentScan;
import org.springframework.context.annotation.FilterType;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * The whole server on the host backend, probed over raw sockets as a hostile client would: idle,
 * slow-header and slow-body connections are closed in time, connections beyond the limit are refused
 * at once, ambiguous framing is a 400, the management port serves no inference, and a client aborting
 * its upload is a cancellation, not a server error.
 */
@SpringBootTest(classes = HttpServerLimitsTest.Application.class, webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT,
        properties = {"gpupool.backend=host", "management.server.port=0", "gpupool.security.operator-password=s3cret",
                "gpupool.server.idle-timeout=3s", "gpupool.server.request-header-timeout=1s",
                "gpupool.server.body-read-timeout=1s", "gpupool.server.request-timeout=3s", "gpupool.server.max-connections=4",
                "gpupool.server.management-max-connections=4"})
@ExtendWith(OutputCaptureExtension.class)
class HttpServerLimitsTest {

    /** The application as it ships, without other test suites' own configurations. */
    @SpringBootConfiguration
    @EnableAutoConfiguration
    @ConfigurationPropertiesScan(basePackageClasses = GpuPoolApplication.class)
    @ComponentScan(basePackageClasses = GpuPoolApplication.class, excludeFilters = {
            @ComponentScan.Filter(type = FilterType.CUSTOM, classes = TypeExcludeFilter.class),
            @ComponentScan.Filter(type = FilterType.ANNOTATION, classes = SpringBootConfiguration.class)})
    static class Application {
    }

    static final String IRIS = """
            {"inputs": [{"name": "input", "shape": [1, 4], "datatype": "FP32", "data": [5.1, 3.5, 1.4, 0.2]}]}""";

    @LocalServerPort
    int port;

    @LocalManagementPort
    int managementPort;

    @Autowired
    ModelRegistry registry;

    @BeforeEach
    void waitForWarmUp() throws InterruptedException {
        long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
        while (!registry.isWarmedUp()) {
            assertThat(System.nanoTime()).as("warm-up finished within 60 s").isLessThan(deadline);
            Thread.sleep(20);
        }
    }

    private Socket connect(int to) throws IOException {
        Socket socket = new Socket("127.0.0.1", to);
        socket.setSoTimeout(5000);
        return socket;
    }

    /** Everything the server sends until it closes the connection (or 5 s pass: then the test fails). */
    private static String readUntilClosed(Socket socket) throws IOException {
        ByteArrayOutputStream got = new ByteArrayOutputStream();
        InputStream in = socket.getInputStream();
        byte[] buffer = new byte[8192];
        try {
            for (int n; (n = in.read(buffer)) >= 0; ) {
                got.write(buffer, 0, n);
            }
        } catch (SocketTimeoutException e) {
            throw new AssertionError("the server kept the connection open; it sent: " + got, e);
        } catch (IOException reset) {
            // a reset after the answer counts as closed
        }
        return got.toString(StandardCharsets.ISO_8859_1);
    }

    /** The status line and headers of one response, leaving the connection open. */
    private static String readHead(Socket socket) throws IOException {
        ByteArrayOutputStream got = new ByteArrayOutputStream();
        InputStream in = socket.getInputStream();
        while (!got.toString(StandardCharsets.ISO_8859_1).contains("\r\n\r\n")) {
            int b = in.read();
            if (b < 0) {
                break;
            }
            got.write(b);
        }
        return got.toString(StandardCharsets.ISO_8859_1);
    }

    /** One response with a Content-Length body (as the inference API answers), leaving the connection open. */
    private static String readResponse(Socket socket) throws IOException {
        String head = readHead(socket);
        int at = head.toLowerCase(Locale.ROOT).indexOf("content-length:");
        assertThat(at).as("a Content-Length in %s", head).isNotNegative();
        int length = Integer.parseInt(head.substring(at + 15, head.indexOf("\r\n", at)).trim());
        byte[] body = socket.getInputStream().readNBytes(length);
        return head + new String(body, StandardCharsets.ISO_8859_1);
    }

    private static void send(Socket socket, String text) throws IOException {
        OutputStream out = socket.getOutputStream();
        out.write(text.getBytes(StandardCharsets.ISO_8859_1));
        out.flush();
    }

    private static String infer(String headers, String body) {
        return "POST /v2/models/iris-mlp/infer HTTP/1.1\r\n" + headers + "Content-Type: application/json\r\n"
                + "Content-Length: " + body.length() + "\r\n\r\n" + body;
    }

    @Test
    void anIdleConnectionIsClosedAfterTheIdleTimeout() throws IOException {
        try (Socket socket = connect(port)) {
            long start = System.nanoTime();
            assertThat(readUntilClosed(socket)).isEmpty();
            assertThat(Duration.ofNanos(System.nanoTime() - start)).isGreaterThan(Duration.ofMillis(800));
        }
    }

    @Test
    void theManagementPortHasTheLimitsToo() throws IOException {
        try (Socket socket = connect(port)) {
            send(socket, "GET /actuator/health/liveness HTTP/1.1\r\nHost: x\r\n");
            long start = System.nanoTime();
            readUntilClosed(socket);
            assertThat(Duration.ofNanos(System.nanoTime() - start)).isLessThan(Duration.ofMillis(2500));
        }
        try (Socket socket = connect(managementPort)) {
            send(socket, "GET /actuator/health/liveness HTTP/1.1\r\nHost: x\r\n");
            long start = System.nanoTime();
            readUntilClosed(socket);
            assertThat(Duration.ofNanos(System.nanoTime() - start)).isLessThan(Duration.ofMillis(2500));
        }
    }

    @Test
    void headersTrickledByteByByteGet408() throws Exception {
        try (Socket socket = connect(port)) {
            send(socket, "POST /v2/models/iris-mlp/infer HTTP/1.1\r\nHost: x\r\n");
            Thread thread = Thread.ofVirtual().start(() -> {
                try {
                    for (int i = 0; i < 40; i++) {
                        send(socket, "X");
                        Thread.sleep(100);
                    }
                } catch (IOException | InterruptedException closed) {
                    // the server closed the connection: what the test waits for
                }
            });
            long start = System.nanoTime();
            String answer = readUntilClosed(socket);
            // closed by the header deadline (1 s), not the idle timeout (3 s, and the trickle keeps it busy);
            // the 408 itself can be lost to the reset the trickle's next write causes
            assertThat(Duration.ofNanos(System.nanoTime() - start)).isLessThan(Duration.ofMillis(2500));
            assertThat(answer).satisfiesAnyOf(a -> assertThat(a).isEmpty(), a -> assertThat(a).startsWith("HTTP/1.1 408"));
            thread.join();
        }
    }

    @Test
    void aBodyThatStopsArrivingIs408NamingTheTimeoutOnEveryRouteAndCountsNoServerError(CapturedOutput output)
            throws Exception {
        for (String path : new String[] {"/v2/models/iris-mlp/infer", "/v2/models/no-such-model/infer",
                "/v2/repository/index", "/v2/repository/models/iris-mlp/load"}) {
            try (Socket socket = connect(port)) {
                send(socket, "POST " + path + " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                        + "Content-Length: 200\r\n\r\n{\"inputs\": [");
                long start = System.nanoTime();
                assertThat(readUntilClosed(socket)).as(path).startsWith("HTTP/1.1 408")
                        .contains("gpupool.server.body-read-timeout").contains("1s");
                assertThat(Duration.ofNanos(System.nanoTime() - start)).isLessThan(Duration.ofSeconds(4));
            }
        }
        Thread.sleep(300);
        assertThat(prometheus()).doesNotContainPattern("http_server_requests_seconds_count\\{[^}]*status=\"500\"[^}]*}");
        assertThat(output).doesNotContain("500 Server Error").doesNotContain("Inference request failed with an unexpected error")
                .doesNotContain("ReadTimeoutException");
    }

    @Test
    void aBodyTrickledPastTheRequestTimeoutIs408NamingItAndCountsNoServerError(CapturedOutput output) throws Exception {
        try (Socket socket = connect(port)) {
            long start = System.nanoTime();                     // before the server's clock starts, never after
            send(socket, "POST /v2/models/iris-mlp/infer HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                    + "Content-Length: 400\r\n\r\n{");
            Thread trickle = Thread.ofPlatform().daemon().start(() -> {
                try {
                    for (int i = 0; i < 20; i++) {
                        Thread.sleep(400); // each pause below the 1 s body-read timeout: only the 3 s one can end it
                        send(socket, " ");
                    }
                } catch (IOException | InterruptedException closedByTheServer) {
                    // the answer came; the connection is gone
                }
            });
            String answer = readUntilClosed(socket);
            Duration took = Duration.ofNanos(System.nanoTime() - start);
            trickle.interrupt();
            assertThat(answer).startsWith("HTTP/1.1 408").contains("gpupool.server.request-timeout").contains("3s")
                    .doesNotContain("body-read-timeout");
            assertThat(took).isGreaterThanOrEqualTo(Duration.ofMillis(2900)).isLessThan(Duration.ofMillis(4500));
        }
        Thread.sleep(300);
        assertThat(prometheus()).doesNotContainPattern("http_server_requests_seconds_count\\{[^}]*status=\"500\"[^}]*}");
        assertThat(output).doesNotContain("500 Server Error").doesNotContain("Inference request failed with an unexpected error");
    }

    @Test
    void aBodyThatKeepsArrivingSlowerThanOnePartATimeoutIsServed() throws Exception {
        try (Socket socket = connect(port)) {
            send(socket, "POST /v2/models/iris-mlp/infer HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                    + "Content-Length: " + IRIS.length() + "\r\n\r\n");
            int third = IRIS.length() / 3;
            for (String part : new String[] {IRIS.substring(0, third), IRIS.substring(third, 2 * third),
                    IRIS.substring(2 * third)}) {
                Thread.sleep(600); // each pause below the 1 s body-read timeout, all of them above it
                send(socket, part);
            }
            assertThat(readResponse(socket)).startsWith("HTTP/1.1 200").contains("outputs");
        }
    }

    @Test
    void connectionsBeyondTheLimitAreRefusedAtOnceAndTheManagementPortStaysReachable() throws IOException {
        List<Socket> held = new ArrayList<>();
        try {
            // A connection surely counts once the server has answered on it: waiting for each answer makes the
            // extra connection the fifth the server sets up, whichever event loops set them up and when. An
            // earlier test's connection the server has not yet seen closed still holds a slot: the fourth is
            // then refused, and tried again until that slot is free.
            long deadline = System.nanoTime() + Duration.ofSeconds(5).toNanos();
            while (held.size() < 4) {
                Socket socket = connect(port);
                send(socket, "GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n"); // kept alive afterwards
                String head = readHead(socket);
                if (head.startsWith("HTTP/1.1 503") && System.nanoTime() < deadline) {
                    socket.close();
                    Thread.sleep(50);
                    continue;
                }
                held.add(socket);
                assertThat(head).as("connection %d of 4", held.size()).startsWith("HTTP/1.1 200");
            }
            try (Socket extra = connect(port)) {
                assertThat(readUntilClosed(extra)).startsWith("HTTP/1.1 503").contains("too many connections");
            }
            try (Socket probe = connect(managementPort)) {
                send(probe, "GET /actuator/health/liveness HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
                assertThat(readUntilClosed(probe)).startsWith("HTTP/1.1 200");
            }
        } catch (InterruptedException e) {
            throw new AssertionError(e);
        } finally {
            for (Socket socket : held) {
                socket.close();
            }
        }
    }

    @Test
    void headersBeyondTheLimitAre431AndATooLongRequestLineIs414EachNamingTheProblem() throws IOException {
        try (Socket socket = connect(port)) {
            send(socket, infer("Host: x\r\nX-Padding: " + "a".repeat(20_000) + "\r\n", IRIS));
            String answer = readUntilClosed(socket);
            assertThat(answer).startsWith("HTTP/1.1 431").contains("server.max-http-request-header-size");
            assertThat(answer.substring(answer.indexOf("\r\n\r\n") + 4)).startsWith("{\"error\":");
        }
        try (Socket socket = connect(port)) {
            send(socket, "GET /v2/models/" + "m".repeat(10_000) + " HTTP/1.1\r\nHost: x\r\n\r\n");
            assertThat(readUntilClosed(socket)).startsWith("HTTP/1.1 414").contains("request line is longer");
        }
        try (Socket socket = connect(port)) {
            send(socket, infer("Host: x\r\n", IRIS));
            assertThat(readResponse(socket)).as("the server serves the next connection").startsWith("HTTP/1.1 200");
        }
    }

    @Test
    void pathsTheFirewallRefusesAre400WithAnErrorNamingTheProblem() throws IOException {
        for (String path : new String[] {"/v2/models//infer", "/v2/models/%2e%2e/infer", "/v2/models/iris-mlp%2Finfer",
                "/v2/models/iris-mlp;x=1/infer", "/v2/systemsharedmemory/region//status"}) {
            try (Socket socket = connect(port)) {
                send(socket, infer("Host: x\r\n", IRIS).replace("/v2/models/iris-mlp/infer", path));
                String answer = readResponse(socket);
                assertThat(answer).as(path).startsWith("HTTP/1.1 400").contains("{\"error\":\"the request path is refused: ");
            }
        }
    }

    @Test
    void aRequestTargetThatIsNoValidUriIs400NamingWhere() throws IOException {
        for (String target : new String[] {"/v2/health/live?%ZZ", "/v2/models/%ZZ/infer", "/v2/health/live?x=%G1",
                "/v2/health/live?a|b"}) {
            try (Socket socket = connect(port)) {
                send(socket, "GET " + target + " HTTP/1.1\r\nHost: x\r\n\r\n");
                assertThat(readUntilClosed(socket)).as(target).startsWith("HTTP/1.1 400")
                        .contains("{\"error\":\"the request target is not a valid URI (RFC 3986): ");
            }
        }
        try (Socket socket = connect(port)) {
            send(socket, "GET /v2/health/live?x=%41%2F HTTP/1.1\r\nHost: x\r\n\r\n");
            assertThat(readResponse(socket)).as("valid escapes").startsWith("HTTP/1.1 200");
        }
    }

    @Test
    void methodsTheFirewallRefusesAre405NamingTheMethodWithTheMethodsAnswered() throws IOException {
        for (String method : new String[] {"TRACE", "CONNECT", "get", "FOO"}) {
            try (Socket socket = connect(port)) {
                send(socket, method + " /v2/health/live HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n");
                String answer = readResponse(socket);
                assertThat(answer).as(method).startsWith("HTTP/1.1 405")
                        .containsIgnoringCase("allow: GET, HEAD, POST, DELETE, OPTIONS")
                        .contains("{\"error\":\"method " + method + " is not allowed: this server answers GET, HEAD, POST, DELETE, OPTIONS");
            }
        }
    }

    @Test
    void aTransferCodingOtherThanChunkedIs400AndCloses() throws IOException {
        for (String coding : new String[] {"gzip", "foo, chunked", "gzip, chunked", "chunked, chunked"}) {
            try (Socket socket = connect(port)) {
                send(socket, INFER_HEAD + "Transfer-Encoding: " + coding + "\r\n\r\n" + chunked(IRIS));
                assertThat(readUntilClosed(socket)).as(coding).startsWith("HTTP/1.1 400")
                        .contains("Transfer-Encoding must be chunked alone");
            }
        }
    }

    /** A length that is no single decimal number cannot frame the body: answered, named, on both ports. */
    @Test
    void aContentLengthThatIsNoSingleNumberIs400NamingIt() throws IOException {
        String[] lengths = {"abc", "1e3", "", "9223372036854775808", "79, 79", "-1", "+5", "5\r\nContent-Length: 5"};
        for (int to : new int[] {port, managementPort}) {
            for (String length : lengths) {
                try (Socket socket = connect(to)) {
                    send(socket, "POST /v2/models/iris-mlp/infer HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                            + "Content-Length: " + length + "\r\n\r\n{}");
                    assertThat(readUntilClosed(socket)).as("%s on %d", length, to).startsWith("HTTP/1.1 400")
                            .contains("{\"error\":\"Content-Length must be one decimal number");
                }
            }
        }
    }

    /** A chunked body whose single chunk is {@code body}. */
    private static String chunked(String body) {
        return Integer.toHexString(body.length()) + "\r\n" + body + "\r\n0\r\n\r\n";
    }

    private static final String INFER_HEAD = "POST /v2/models/iris-mlp/infer HTTP/1.1\r\nHost: x\r\n"
            + "Content-Type: application/json\r\n";

    @Test
    void chunkedTogetherWithContentLengthIs400AndClosesInEitherOrder() throws IOException {
        // The Content-Length covers only the chunk-size line: a proxy that frames by it would read the rest of
        // the body as a second request (smuggled), so that request must never be answered.
        String smuggled = "GET /v2/health/ready HTTP/1.1\r\nHost: x\r\n\r\n";
        String body = chunked(IRIS) + smuggled;
        for (String headers : List.of(
                "Transfer-Encoding: chunked\r\nContent-Length: 4\r\n",
                "Content-Length: 4\r\nTransfer-Encoding: chunked\r\n")) {
            try (Socket socket = connect(port)) {
                send(socket, INFER_HEAD + headers + "\r\n" + body);
                String answer = readUntilClosed(socket);
                assertThat(answer).as(headers).startsWith("HTTP/1.1 400")
                        .contains("Transfer-Encoding and Content-Length must not both be sent")
                        .doesNotContain("outputs").doesNotContain("HTTP/1.1 200");
            }
        }
        try (Socket socket = connect(port)) {
            send(socket, INFER_HEAD.replace("HTTP/1.1", "HTTP/1.0") + "Transfer-Encoding: chunked\r\n\r\n" + body);
            assertThat(readUntilClosed(socket)).startsWith("HTTP/1.1 400")
                    .contains("Transfer-Encoding is not allowed in an HTTP/1.0 request").doesNotContain("outputs");
        }
    }

    @Test
    void theServerRefusesToStartWithNettysRfc9112FramingTurnedOff() {
        assertThatThrownBy(() -> RequestFraming.requireRfc9112Decoder(false))
                .hasMessageContaining("-Dio.netty.handler.codec.http.rfc9112TransferEncoding=false")
                .hasMessageContaining("RFC 9112 section 6.3");
    }

    /** A refused request pipelined behind a served one is answered after it, not in its place. */
    @Test
    void aRefusedRequestPipelinedBehindAServedOneIsAnsweredAfterIt() throws IOException {
        String[] refused = {"GET /v2 HTTP/1.1\r\n\r\n", "GET /v2 HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n",
                "GET /v2 HTTP/1.1\r\nHost: x\r\nContent-Length: x\r\n\r\n",
                INFER_HEAD + "Transfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n"};
        for (String second : refused) {
            try (Socket socket = connect(port)) {
                send(socket, infer("Host: x\r\n", IRIS) + second);
                String all = readUntilClosed(socket);
                String[] answers = all.split("(?=HTTP/1\\.1 [0-9]{3} )");
                assertThat(answers).as("answers to %s in %s", second, all).hasSize(2);
                assertThat(answers[0]).startsWith("HTTP/1.1 200").contains("outputs");
                assertThat(answers[1]).startsWith("HTTP/1.1 400");
            }
        }
    }

    /** A header the decoder cannot read is not blamed on the headers after it, which it never read. */
    @Test
    void aMalformedHeaderIsNotReportedAsAMissingHost() throws IOException {
        try (Socket socket = connect(port)) {
            send(socket, "GET /v2/health/ready HTTP/1.1\r\nBad Header: 1\r\nHost: x\r\n\r\n");
            assertThat(readUntilClosed(socket)).startsWith("HTTP/1.1 400").doesNotContain("Host header");
        }
    }

    @Test
    void plainChunkedAndPlainContentLengthAreServedAndKeepTheConnection() throws IOException {
        try (Socket socket = connect(port)) {
            send(socket, INFER_HEAD + "Transfer-Encoding: chunked\r\n\r\n" + chunked(IRIS));
            assertThat(readResponse(socket)).startsWith("HTTP/1.1 200").contains("outputs");
            send(socket, infer("Host: x\r\n", IRIS));
            assertThat(readResponse(socket)).startsWith("HTTP/1.1 200").contains("outputs");
            send(socket, INFER_HEAD + "Transfer-Encoding: chunked\r\n\r\n" + chunked(IRIS));
            assertThat(readResponse(socket)).as("the connection is still open after two answers")
                    .startsWith("HTTP/1.1 200").contains("outputs");
        }
    }

    /**
     * A keep-alive client that sends its next request the moment an answer arrives, its body in a packet of its
     * own (as python-requests and tritonclient do), races reactor-netty's end of the previous exchange; the
     * race leaves requests unread unless {@link KeepAliveReadResume} asks for the read.
     */
    @Test
    void aKeptAliveConnectionReadsEveryRequestSentTheMomentTheLastAnswerArrived() throws IOException {
        String get = "GET /v2/health/ready HTTP/1.1\r\nHost: x\r\n\r\n";
        String post = "POST /v2/models/iris-mlp/infer HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                + "Content-Length: " + IRIS.length() + "\r\n\r\n";
        try (Socket socket = connect(port)) {
            socket.setTcpNoDelay(true);
            for (int exchange = 0; exchange < KEPT_ALIVE_EXCHANGES; exchange++) {
                send(socket, get);
                assertThat(answerOrTimeout(socket, exchange)).startsWith("HTTP/1.1 200");
                send(socket, post);
                send(socket, IRIS);
                assertThat(answerOrTimeout(socket, exchange)).startsWith("HTTP/1.1 200").contains("outputs");
            }
        }
    }

    /**
     * Pipelined requests are answered in order; the one asking to close is answered before the connection closes,
     * and what the client sent after it is not served (RFC 9112 section 9.6).
     */
    @Test
    void aPipelinedRequestAskingToCloseIsAnsweredAfterThoseBeforeItAndThenTheConnectionCloses() throws IOException {
        String post = infer("Host: x\r\n", IRIS);
        String closingGet = "GET /v2/health/ready HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
        String after = "GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n";
        try (Socket socket = connect(port)) {
            send(socket, post + closingGet + after);
            String all = readUntilClosed(socket);
            String[] answers = all.split("(?=HTTP/1\\.1 )");
            assertThat(answers).as("answers in %s", all).hasSize(2);
            assertThat(answers[0]).startsWith("HTTP/1.1 200").contains("outputs")
                    .doesNotContainIgnoringCase("connection: close");
            assertThat(answers[1]).startsWith("HTTP/1.1 200").containsIgnoringCase("connection: close");
        }
    }

    /** Pairs of exchanges: without the read resumed, a request went unread within the first dozen in each trial. */
    private static final int KEPT_ALIVE_EXCHANGES = 300;

    private static String answerOrTimeout(Socket socket, int exchange) throws IOException {
        try {
            return readResponse(socket);
        } catch (SocketTimeoutException e) {
            throw new AssertionError("no answer within 5 s on a kept-alive connection after " + exchange
                    + " exchanges: the server stopped reading it", e);
        }
    }

    @Test
    void http11WithoutHostIs400AndHttp10WithoutHostIsServed() throws IOException {
        try (Socket socket = connect(port)) {
            send(socket, infer("", IRIS));
            assertThat(readUntilClosed(socket)).startsWith("HTTP/1.1 400").contains("exactly one Host header");
        }
        try (Socket socket = connect(port)) {
            send(socket, infer("", IRIS).replace("HTTP/1.1", "HTTP/1.0"));
            assertThat(readUntilClosed(socket)).contains(" 200 ");
        }
    }

    @Test
    void theManagementPortDoesNotServeTheInferenceApi() throws IOException {
        try (Socket socket = connect(managementPort)) {
            send(socket, infer("Host: x\r\nConnection: close\r\n", IRIS));
            String answer = readUntilClosed(socket);
            assertThat(answer).startsWith("HTTP/1.1 401").doesNotContain("outputs");
        }
    }

    @Test
    void aClientAbortingItsUploadIsACancellationNotAnError(CapturedOutput output) throws Exception {
        try (Socket socket = connect(port)) {
            send(socket, "POST /v2/models/iris-mlp/infer HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                    + "Content-Length: 5000\r\n\r\n{\"inputs\": [");
            Thread.sleep(200);
        }
        // The server sees the abort when its read fails: poll the counter rather than guess how long that takes.
        java.util.regex.Pattern cancelled =
                java.util.regex.Pattern.compile("gpupool_inference_requests_total\\{[^}]*outcome=\"cancelled\"[^}]*} [1-9]");
        String metrics = prometheus();
        long deadline = System.nanoTime() + Duration.ofSeconds(10).toNanos();
        while (!cancelled.matcher(metrics).find() && System.nanoTime() < deadline) {
            Thread.sleep(100);
            metrics = prometheus();
        }
        assertThat(metrics).containsPattern(cancelled);
        assertThat(metrics).doesNotContainPattern("gpupool_inference_requests_total\\{[^}]*outcome=\"error\"[^}]*} [1-9]");
        assertThat(output).doesNotContain("Inference request failed with an unexpected error");
    }

    @Test
    void aMalformedChunkSizeIs400NamingItAndCountsNoServerError(CapturedOutput output) throws Exception {
        try (Socket socket = connect(port)) {
            send(socket, INFER_HEAD + "Transfer-Encoding: chunked\r\n\r\nzz\r\n" + IRIS + "\r\n0\r\n\r\n");
            assertThat(readUntilClosed(socket)).startsWith("HTTP/1.1 400").contains("chunk size")
                    .doesNotContain("outputs");
        }
        Thread.sleep(300);
        assertThat(prometheus()).doesNotContainPattern("http_server_requests_seconds_count\\{[^}]*status=\"500\"[^}]*}");
        assertThat(output).doesNotContain("500 Server Error").doesNotContain("Inference request failed with an unexpected error");
    }

    /** An operator's client that drops the connection in the middle of a tuning body is no server error either. */
    @Test
    void aTuningBodyAbandonedMidwayCountsNoServerError(CapturedOutput output) throws Exception {
        try (Socket socket = connect(managementPort)) {
            send(socket, "POST /actuator/gpupool/host:0 HTTP/1.1\r\nHost: x\r\nAuthorization: Basic "
                    + java.util.Base64.getEncoder().encodeToString("operator:s3cret".getBytes(StandardCharsets.UTF_8))
                    + "\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"coal");
            Thread.sleep(500);                  // the server is reading the body (its read deadline here: 1 s)
        }
        java.util.regex.Pattern gone = java.util.regex.Pattern.compile(
                "http_server_requests_seconds_count\\{[^}]*method=\"POST\",outcome=\"(UNKNOWN|CLIENT_ERROR)\"[^\\n]*} [1-9]");
        String metrics = prometheus();
        long deadline = System.nanoTime() + Duration.ofSeconds(10).toNanos();
        while (!gone.matcher(metrics).find() && System.nanoTime() < deadline) {
            Thread.sleep(100);
            metrics = prometheus();
        }
        assertThat(metrics).as("counted as the client's leaving").containsPattern(gone);
        assertThat(metrics).doesNotContainPattern("http_server_requests_seconds_count\\{[^}]*status=\"500\"[^}]*}");
        assertThat(output).doesNotContain("500 Server Error");
    }

    private String prometheus() throws IOException {
        try (Socket socket = connect(managementPort)) {
            send(socket, "GET /actuator/prometheus HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
            return readUntilClosed(socket);
        }
    }
}
