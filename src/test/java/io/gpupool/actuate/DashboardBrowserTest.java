package io.gpupool.actuate;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.web.server.LocalManagementPort;
import org.springframework.util.FileSystemUtils;

/**
 * Loads the dashboard in headless Chromium against a running server with two fake pools and checks
 * what the page rendered after its scripts ran: a card per device with the pool's numbers, the
 * buddy map canvases and the tuning form filled with the configuration in force. Skipped where no
 * Chromium is installed ({@code /usr/bin/chromium} or {@code $CHROMIUM}).
 */
@Tag("browser")
@SpringBootTest(classes = OperationsTestApplication.class, webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT,
        properties = {"management.server.port=0", "gpupool.security.operator-password=s3cret"})
class DashboardBrowserTest {

    @LocalManagementPort
    int managementPort;

    @TempDir
    Path profile;

    @Test
    void theDashboardRendersEveryDeviceWithItsBuddyMapAndTuningForm() throws Exception {
        Path chromium = Path.of(System.getenv().getOrDefault("CHROMIUM", "/usr/bin/chromium"));
        assumeTrue(Files.isExecutable(chromium), "no Chromium at " + chromium);

        String dom = dumpDom(chromium, profile, "http://localhost:" + managementPort + "/actuator/dashboard");

        assertThat(dom).contains("cuda:0").contains("cuda:1");
        assertThat(dom).contains("15.8%");                    // fragmentation 1 - 64/76 of the fake pool
        assertThat(dom).contains("256MB / 920MB");            // reserved against the cap in force
        assertThat(dom).contains("85.7%");                    // stream 0's local hit ratio, 600/700
        assertThat(dom).contains("chunk 0: 256MB, 76MB free");
        assertThat(dom).containsPattern("name=\"coalesceThreshold\"[^>]*data-current=\"10\"|data-current=\"10\"[^>]*name=\"coalesceThreshold\"");
        assertThat(dom).contains("id=\"status\">updated ");  // the refresh went through, no error shown
    }

    /** The DOM of {@code url} after its scripts ran (virtual time budget 8 s), using {@code profile} for Chromium's data. */
    static String dumpDom(Path chromium, Path profile, String url) throws IOException, InterruptedException {
        Path userData = Files.createDirectories(profile.resolve("chromium"));
        List<String> command = List.of(chromium.toString(), "--headless", "--no-sandbox", "--disable-gpu",
                "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update",
                "--disable-sync", "--user-data-dir=" + userData, "--window-size=1400,1600",
                "--virtual-time-budget=8000", "--dump-dom", url);
        Path log = profile.resolve("chromium.log");
        Process process = new ProcessBuilder(command).redirectError(log.toFile()).start();
        byte[] out = process.getInputStream().readAllBytes();
        if (!process.waitFor(60, TimeUnit.SECONDS)) {
            process.destroyForcibly();
            throw new IllegalStateException("chromium did not finish within 60 s");
        }
        FileSystemUtils.deleteRecursively(userData);
        String dom = new String(out, StandardCharsets.UTF_8);
        if (dom.isBlank()) {
            throw new IllegalStateException("chromium rendered nothing; its log:\n" + Files.readString(log));
        }
        return dom;
    }
}
