package io.gpupool.deploy;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.fail;

import java.io.IOException;
import java.net.ServerSocket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.Base64;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import com.github.dockerjava.api.command.HealthState;
import com.github.dockerjava.api.command.InspectContainerResponse;
import com.github.dockerjava.api.model.AccessMode;
import com.github.dockerjava.api.model.Bind;
import com.github.dockerjava.api.model.Capability;
import com.github.dockerjava.api.model.Volume;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.testcontainers.DockerClientFactory;
import org.testcontainers.containers.GenericContainer;
import org.testcontainers.containers.output.OutputFrame;
import org.testcontainers.containers.ContainerLaunchException;
import org.testcontainers.containers.wait.strategy.AbstractWaitStrategy;
import org.testcontainers.images.builder.ImageFromDockerfile;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.json.JsonMapper;
import tools.jackson.databind.node.ObjectNode;

/**
 * End-to-end test of the container image as operators get it: the repository's real
 * {@code Dockerfile}, built and started by a local Docker engine, answering on its ports.
 *
 * <p>How the image is built without a network:
 * <ol>
 *   <li>{@code BASE_IMAGE} and {@code BUILD_IMAGE} are replaced by a local stand-in for the Temurin
 *       JRE image (Debian minbase + a jlink'd Java 25 runtime, made by
 *       {@code tools/ci/build-base-image.sh}; property {@code gpupool.test.base-image});</li>
 *   <li>{@code APP_JAR} names the jar this Maven run just packaged (failsafe runs after
 *       {@code package}; property {@code gpupool.test.app-jar}), so the build stage copies it
 *       instead of running Maven.</li>
 * </ol>
 * The container runs with host networking (the CI engine has no bridge) on two free ports, the
 * shipped example model bound read-only into its {@code /models} volume, and the restrictions of the Helm
 * chart's security context (read-only root file system, {@code /tmp} writable, no capabilities).
 *
 * <p>Skips (each test, so that the counts show it) only when no Docker engine answers, unless {@code GPUPOOL_REQUIRE_DOCKER=true}
 * (set by {@code .ci/run}, which starts the engine): then a missing engine fails the test.
 */
@Tag("docker")
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class ContainerImageIT {

    private static final String MODEL = "iris-mlp";
    /** The production profile refuses to start without an operator password. */
    private static final String OPERATOR_PASSWORD = "container-test-only";
    private static final JsonMapper JSON = JsonMapper.builder().build();

    private final HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();
    private final List<String> logs = new CopyOnWriteArrayList<>();
    private static final Pattern STARTED =
        Pattern.compile("Started \\w+ in ([0-9.]+) seconds \\(process running for ([0-9.]+)\\)");

    private GenericContainer<?> server;
    /** When {@code /v2/health/ready} first answered 200; null before. */
    private volatile Instant readyAt;
    private int appPort;
    private int managementPort;

    @BeforeAll
    void startImage() throws IOException {
        boolean dockerUp = DockerClientFactory.instance().isDockerAvailable();
        if (!dockerUp && Boolean.parseBoolean(System.getenv("GPUPOOL_REQUIRE_DOCKER"))) {
            fail("GPUPOOL_REQUIRE_DOCKER=true but no Docker engine answers (see tools/ci/start-dockerd.sh)");
        }
        if (!dockerUp) {
            return; // each test then reports itself skipped (see requireDocker)
        }

        Path projectDir = Path.of("").toAbsolutePath();
        Path jar = Path.of(System.getProperty("gpupool.test.app-jar", "target/gpupool-0.1.0-SNAPSHOT.jar"));
        assertThat(jar).as("the packaged application jar (run through `mvn verify`)").isRegularFile();
        Path models = projectDir.resolve("models").resolve(MODEL);
        assertThat(models).as("the shipped example model").isDirectory();
        String baseImage = System.getProperty("gpupool.test.base-image", "gpupool-ci/jre25:latest");
        assertThat(DockerClientFactory.lazyClient().listImagesCmd().withImageNameFilter(baseImage).exec())
            .as("local base image %s (build it with tools/ci/build-base-image.sh)", baseImage)
            .isNotEmpty();

        // The context holds what the Dockerfile reads in APP_JAR mode, under the same paths as in
        // the repository (Testcontainers' scan of .dockerignore mishandles '!' exceptions, so the
        // context is listed here instead of filtered there).
        String jarInContext = "target/" + jar.getFileName();
        ImageFromDockerfile image = new ImageFromDockerfile("gpupool-it", true)
            .withFileFromPath("Dockerfile", projectDir.resolve("Dockerfile"))
            .withFileFromPath("config", projectDir.resolve("config"))
            .withFileFromPath("docker", projectDir.resolve("docker"))
            .withFileFromPath(jarInContext, jar)
            .withBuildArg("BASE_IMAGE", baseImage)
            .withBuildArg("BUILD_IMAGE", baseImage)
            .withBuildArg("APP_JAR", jarInContext)
            .withBuildImageCmdModifier(cmd -> cmd.withNetworkMode("host"));

        appPort = freePort();
        managementPort = freePort();
        server = new GenericContainer<>(image)
            .withNetworkMode("host")
            .withEnv("SPRING_PROFILES_ACTIVE", "production,host")
            .withEnv("SERVER_PORT", Integer.toString(appPort))
            .withEnv("MANAGEMENT_SERVER_PORT", Integer.toString(managementPort))
            .withEnv("GPUPOOL_SECURITY_OPERATOR_PASSWORD", OPERATOR_PASSWORD)
            .withEnv("JDK_JAVA_OPTIONS", "-Xmx512m")
            // As the Helm chart runs it: read-only root with /tmp writable, no capabilities, no
            // privilege escalation. /tmp must allow exec: JCuda and Netty load the natives they unpack there.
            .withTmpFs(Map.of("/tmp", "rw,exec,size=256m"))
            .withCreateContainerCmdModifier(cmd -> cmd.getHostConfig()
                // The model read-only, as the chart mounts the model volume. A plain bind (the
                // engine is local): Testcontainers' own file-system bind first probes the engine
                // with an alpine container, which would mean a pull.
                .withBinds(new Bind(models.toString(), new Volume("/models/" + MODEL), AccessMode.ro))
                .withReadonlyRootfs(true)
                .withCapDrop(Capability.ALL)
                .withSecurityOpts(List.of("no-new-privileges")))
            .withLogConsumer((OutputFrame frame) -> logs.add(frame.getUtf8StringWithoutLineEnding()))
            // The image's own HEALTHCHECK (readiness on the management port) decides when we start.
            .waitingFor(new HealthyOrExited().withStartupTimeout(Duration.ofMinutes(3)));
        try {
            server.start();
        } catch (RuntimeException e) {
            throw new AssertionError("container failed to start or to become healthy; its log:\n" + String.join("\n", logs), e);
        }
        recordStartUp();
    }

    /**
     * Writes how long the image took to serve, for docs/benchmarks.md ("Start-up"): from the moment the
     * engine started the container (its {@code State.StartedAt}, as after {@code docker run}; the image
     * build before it does not count) to the first 200 of {@code /v2/health/ready}, polled every 50 ms,
     * and the JVM's own "Started ... in" line. A measurement, not a check: the time depends on the machine.
     */
    private void recordStartUp() throws IOException {
        String log = String.join("\n", logs);
        Matcher started = STARTED.matcher(log);
        boolean found = started.find();
        ObjectNode startUp = JSON.createObjectNode()
            .put("readySecondsFromContainerStart", secondsFromContainerStart(readyAt))
            .put("startedSeconds", found ? Double.parseDouble(started.group(1)) : -1)
            .put("processSeconds", found ? Double.parseDouble(started.group(2)) : -1)
            .put("aotCacheWarnings", log.lines().filter(line -> line.contains("[aot]")).count())
            .put("cpus", Runtime.getRuntime().availableProcessors());
        Path out = Path.of("target", "container-startup.json");
        Files.createDirectories(out.getParent());
        Files.writeString(out, JSON.writeValueAsString(startUp));
        System.out.println("container start-up: " + startUp);
    }

    /**
     * Skips each test, rather than the class, when no engine answers: an assumption failing in
     * {@code @BeforeAll} aborts the class, which the build reports as neither run nor skipped.
     */
    @BeforeEach
    void requireDocker() {
        Assumptions.assumeTrue(server != null, "no Docker engine: image test skipped");
    }

    @AfterAll
    void stop() {
        if (server != null) {
            String imageName = server.getDockerImageName();
            server.stop();
            // Ryuk is off on CI, so nothing else removes the image this run built.
            DockerClientFactory.lazyClient().removeImageCmd(imageName).withForce(true).exec();
        }
    }

    @Test
    void runsAsTheNonRootUserWithTheDeploymentConfiguration() throws Exception {
        assertThat(server.execInContainer("id", "-u").getStdout().strip()).isEqualTo("10001");
        assertThat(server.execInContainer("ls", "/config").getStdout())
            .contains("application-production.yml", "application-host.yml", "application-cuda.yml");
        assertThat(String.join("\n", logs)).contains("production", "host");
    }

    @Test
    void readinessAndLivenessGroupsAnswerOnTheManagementPort() throws Exception {
        assertThat(get(managementPort, "/actuator/health/readiness").statusCode()).isEqualTo(200);
        assertThat(get(managementPort, "/actuator/health/liveness").statusCode()).isEqualTo(200);
        assertThat(get(appPort, "/v2/health/ready").statusCode()).isEqualTo(200);
    }

    @Test
    void classifiesAnIrisFlowerFromTheShippedModel() throws Exception {
        HttpResponse<String> metadata = get(appPort, "/v2/models/" + MODEL);
        assertThat(metadata.statusCode()).as(metadata.body()).isEqualTo(200);
        JsonNode input = JSON.readTree(metadata.body()).path("inputs").path(0);
        assertThat(input.path("name").asString()).isNotEmpty();

        // A textbook setosa: sepal 5.1 x 3.5 cm, petal 1.4 x 0.2 cm.
        ObjectNode request = JSON.createObjectNode();
        ObjectNode tensor = request.putArray("inputs").addObject();
        tensor.put("name", input.path("name").asString());
        tensor.putArray("shape").add(1).add(4);
        tensor.put("datatype", input.path("datatype").asString("FP32"));
        tensor.putArray("data").add(5.1).add(3.5).add(1.4).add(0.2);

        HttpResponse<String> response = post(appPort, "/v2/models/" + MODEL + "/infer", JSON.writeValueAsString(request));
        assertThat(response.statusCode()).as(response.body()).isEqualTo(200);
        JsonNode probabilities = null;
        for (JsonNode output : JSON.readTree(response.body()).path("outputs")) {
            if (output.path("name").asString().equals("probabilities")) {
                probabilities = output.path("data");
            }
        }
        assertThat(probabilities).as("'probabilities' output in %s", response.body()).isNotNull();
        assertThat(probabilities.size()).isEqualTo(3);
        double setosa = probabilities.get(0).asDouble();
        assertThat(setosa).as("P(setosa) in %s", probabilities)
            .isGreaterThan(probabilities.get(1).asDouble())
            .isGreaterThan(probabilities.get(2).asDouble());
    }

    @Test
    void poolEndpointReportsTheDeviceMemoryPool() throws Exception {
        HttpResponse<String> pool = get(managementPort, "/actuator/gpupool");
        assertThat(pool.statusCode()).as(pool.body()).isEqualTo(200);
        JsonNode devices = JSON.readTree(pool.body()).path("devices");
        assertThat(devices.size()).as("devices in %s", pool.body()).isPositive();
        JsonNode device = devices.iterator().next();
        // config/application.yml: TWO_LEVEL; config/application-host.yml: a 1GB cap.
        assertThat(device.path("mode").asString()).as(pool.body()).isEqualTo("TWO_LEVEL");
        assertThat(device.path("capBytes").asLong()).as(pool.body()).isEqualTo(1L << 30);
    }

    @Test
    void trimmingThePoolNeedsTheOperatorCredentialFromTheEnvironment() throws Exception {
        HttpRequest.Builder trim = HttpRequest.newBuilder(uri(managementPort, "/actuator/gpupool"))
            .timeout(Duration.ofSeconds(20)).DELETE();
        assertThat(http.send(trim.build(), HttpResponse.BodyHandlers.ofString()).statusCode()).isEqualTo(401);

        String basic = Base64.getEncoder().encodeToString(("operator:" + OPERATOR_PASSWORD).getBytes());
        HttpResponse<String> trimmed = http.send(trim.header("Authorization", "Basic " + basic).build(),
            HttpResponse.BodyHandlers.ofString());
        assertThat(trimmed.statusCode()).as(trimmed.body()).isEqualTo(200);
    }

    /**
     * Waits until Docker reports the image's HEALTHCHECK healthy, and gives up at once when the
     * container exits (a server that fails to start should not cost the whole start-up timeout).
     */
    private final class HealthyOrExited extends AbstractWaitStrategy {
        @Override
        protected void waitUntilReady() {
            long deadline = System.nanoTime() + startupTimeout.toNanos();
            while (true) {
                if (readyAt == null && answersReady()) {
                    readyAt = Instant.now();
                }
                InspectContainerResponse.ContainerState state = waitStrategyTarget.getCurrentContainerInfo().getState();
                if (!Boolean.TRUE.equals(state.getRunning())) {
                    throw new ContainerLaunchException("container exited with code " + state.getExitCodeLong());
                }
                HealthState health = state.getHealth();
                if (health != null && "healthy".equals(health.getStatus())) {
                    return;
                }
                if (System.nanoTime() > deadline) {
                    throw new ContainerLaunchException("container not healthy after " + startupTimeout
                        + " (health: " + (health == null ? "none" : health.getStatus()) + ")");
                }
                try {
                    Thread.sleep(readyAt == null ? 50 : 500);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    throw new ContainerLaunchException("interrupted while waiting for the container");
                }
            }
        }
    }

    private double secondsFromContainerStart(Instant moment) {
        try {
            Instant started = Instant.parse(server.getContainerInfo().getState().getStartedAt());
            return moment == null ? -1 : Duration.between(started, moment).toNanos() / 1e9;
        } catch (RuntimeException e) {
            return -1; // the engine did not say when it started the container
        }
    }

    private boolean answersReady() {
        try {
            return http.send(HttpRequest.newBuilder(uri(appPort, "/v2/health/ready")).timeout(Duration.ofSeconds(1))
                .GET().build(), HttpResponse.BodyHandlers.discarding()).statusCode() == 200;
        } catch (IOException e) {
            return false; // not listening yet
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return false;
        }
    }

    private HttpResponse<String> get(int port, String path) throws IOException, InterruptedException {
        return http.send(HttpRequest.newBuilder(uri(port, path)).timeout(Duration.ofSeconds(20)).GET().build(),
            HttpResponse.BodyHandlers.ofString());
    }

    private HttpResponse<String> post(int port, String path, String json) throws IOException, InterruptedException {
        return http.send(HttpRequest.newBuilder(uri(port, path)).timeout(Duration.ofSeconds(20))
                .header("Content-Type", "application/json")
                .POST(HttpRequest.BodyPublishers.ofString(json)).build(),
            HttpResponse.BodyHandlers.ofString());
    }

    private static URI uri(int port, String path) {
        return URI.create("http://127.0.0.1:" + port + path);
    }

    private static int freePort() throws IOException {
        try (ServerSocket socket = new ServerSocket(0)) {
            return socket.getLocalPort();
        }
    }
}
