package io.gpupool.actuate;

import io.gpupool.WebTestClients;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;

import com.jayway.jsonpath.JsonPath;
import io.gpupool.GpuPoolApplication;
import io.gpupool.backend.DeviceStream;
import io.gpupool.memory.DeviceBlock;
import io.gpupool.serving.DeviceRuntime;
import io.gpupool.serving.ServingDevices;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.context.TypeExcludeFilter;
import org.springframework.boot.context.properties.ConfigurationPropertiesScan;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.web.server.LocalManagementPort;
import org.springframework.context.annotation.ComponentScan;
import org.springframework.context.annotation.FilterType;
import org.springframework.http.MediaType;
import org.springframework.test.web.reactive.server.WebTestClient;

/**
 * The whole application on the host backend in {@code gpupool.memory.mode=DIRECT} (aligned_alloc and
 * free per block, no pool): the device is still on {@code /actuator/gpupool}, its numbers follow the
 * allocations, and what only a pool has (tuning, the buddy map) is refused or empty.
 */
@SpringBootTest(classes = DirectModeEndpointTest.Application.class,
        webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT,
        properties = {"gpupool.backend=host", "gpupool.memory.mode=DIRECT", "gpupool.models.path=does-not-exist",
                "gpupool.serving.warm-up=false", "management.server.port=0",
                "gpupool.security.operator-password=s3cret"})
class DirectModeEndpointTest {

    /** {@link GpuPoolApplication} as it ships, without the other suites' own configurations. */
    @SpringBootConfiguration
    @EnableAutoConfiguration
    @ConfigurationPropertiesScan(basePackageClasses = GpuPoolApplication.class)
    @ComponentScan(basePackageClasses = GpuPoolApplication.class, excludeFilters = {
            @ComponentScan.Filter(type = FilterType.CUSTOM, classes = TypeExcludeFilter.class),
            @ComponentScan.Filter(type = FilterType.ANNOTATION, classes = SpringBootConfiguration.class)})
    static class Application {
    }

    static final long MIB = 1L << 20;

    @LocalManagementPort
    int managementPort;

    @Autowired
    ServingDevices devices;

    WebTestClient management;

    @BeforeEach
    void client() {
        management = WebTestClients.to("http://localhost:" + managementPort + "/actuator");
    }

    @Test
    void theDeviceIsListedAndItsReservedAndPeakBytesFollowAnAllocation() {
        long reservedBefore = global("reservedBytes");
        long peakBefore = global("peakReservedBytes");
        long allocatedBefore = global("allocatedBytes");
        DeviceRuntime device = devices.devices().getFirst();
        long size = 3 * MIB + 256; // 3 MiB + 1 rounded up to 256 bytes
        try (DeviceStream stream = device.device().createStream(0)) {
            DeviceBlock block = device.allocator().allocate(3 * MIB + 1, stream);
            management.get().uri("/gpupool").exchange()
                    .expectStatus().isOk()
                    .expectBody()
                    .jsonPath("$.devices['host:0'].mode").isEqualTo("DIRECT")
                    .jsonPath("$.devices['host:0'].configuration").doesNotExist()
                    .jsonPath("$.devices['host:0'].global.chunkCount").isEqualTo(0)
                    .jsonPath("$.devices['host:0'].global.fragmentation").isEqualTo(0.0);
            assertThat(global("reservedBytes")).isEqualTo(reservedBefore + size);
            assertThat(global("allocatedBytes")).isEqualTo(allocatedBefore + size);
            assertThat(global("peakReservedBytes")).isEqualTo(Math.max(peakBefore, reservedBefore + size))
                    .isGreaterThanOrEqualTo(size);
            block.release();
        }
        assertThat(global("reservedBytes")).as("each block is its own reservation").isEqualTo(reservedBefore);
        assertThat(global("allocatedBytes")).isEqualTo(allocatedBefore);
        assertThat(global("peakReservedBytes")).as("the peak stays").isGreaterThanOrEqualTo(reservedBefore + size);
    }

    @Test
    void tuningIs400NamingTheModeWhateverTheFields() {
        for (Map<String, Object> body : List.<Map<String, Object>>of(Map.of("coalesceThreshold", 5),
                Map.of("coalesceThreshold", "not a number"))) {
            management.post().uri("/gpupool/host:0").headers(h -> h.setBasicAuth("operator", "s3cret"))
                    .contentType(MediaType.APPLICATION_JSON).bodyValue(body)
                    .exchange()
                    .expectStatus().isBadRequest()
                    .expectBody()
                    .jsonPath("$.error").isEqualTo("mode DIRECT has no pool to tune; "
                            + "gpupool.memory.mode=TWO_LEVEL or GLOBAL_ONLY can be tuned");
        }
    }

    @Test
    void trimReleasesNothingTheLayoutIsEmptyAndHealthAndMetersReadTheDevice() {
        management.delete().uri("/gpupool/host:0").headers(h -> h.setBasicAuth("operator", "s3cret")).exchange()
                .expectStatus().isOk()
                .expectBody().jsonPath("$.releasedBytes").isEqualTo(0);
        management.get().uri("/gpupool/host:0/layout").exchange()
                .expectStatus().isOk()
                .expectBody().jsonPath("$.chunks").isEmpty();
        management.get().uri("/health/pool").exchange()
                .expectStatus().isOk()
                .expectBody().jsonPath("$.status").isEqualTo("UP")
                .jsonPath("$.details['host:0'].status").isEqualTo("UP");
        String prometheus = management.get().uri("/prometheus").exchange().expectStatus().isOk()
                .expectBody(String.class).returnResult().getResponseBody();
        assertThat(prometheus)
                .containsPattern("gpupool_memory_reserved_bytes\\{[^}]*device=\"host:0\"[^}]*} ")
                .containsPattern("gpupool_memory_peak_reserved_bytes\\{[^}]*device=\"host:0\"[^}]*} ")
                .doesNotContain("gpupool_coalesce_threshold")
                .doesNotContain("gpupool_local_cache_cap_bytes");
    }

    /** The dashboard renders a device without a pool: its numbers, no tuning form, no buddy map. */
    @Test
    @Tag("browser")
    void theDashboardShowsTheDeviceWithoutTuningOrBuddyMap(@TempDir Path profile) throws Exception {
        Path chromium = Path.of(System.getenv().getOrDefault("CHROMIUM", "/usr/bin/chromium"));
        assumeTrue(Files.isExecutable(chromium), "no Chromium at " + chromium);

        String dom = DashboardBrowserTest.dumpDom(chromium, profile,
                "http://localhost:" + managementPort + "/actuator/dashboard");

        assertThat(dom).contains("host:0").contains("DIRECT").contains("no pool: totals, peaks and counters only");
        assertThat(dom).contains("no buddy map: this allocator is not a pool");
        assertThat(dom).containsPattern("data-f=\"form\"[^>]*style=\"display: none;\"|style=\"display: none;\"[^>]*data-f=\"form\"");
        assertThat(dom).contains("id=\"status\">updated ");  // the refresh went through, no script error
    }

    /** A number of the device's {@code global} section as the endpoint answers it now. */
    private long global(String field) {
        String body = management.get().uri("/gpupool/host:0").exchange()
                .expectStatus().isOk()
                .expectBody(String.class).returnResult().getResponseBody();
        Number value = JsonPath.read(body, "$.global." + field);
        return value.longValue();
    }
}
