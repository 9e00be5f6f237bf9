package io.gpupool.deploy;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.io.InputStream;
import java.net.URL;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Enumeration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;
import java.util.stream.Stream;

import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.springframework.boot.context.properties.bind.Binder;
import org.springframework.boot.context.properties.source.ConfigurationPropertySources;
import org.springframework.boot.env.YamlPropertySourceLoader;
import org.springframework.core.env.EnumerablePropertySource;
import org.springframework.core.env.MutablePropertySources;
import org.springframework.core.env.PropertySource;
import org.springframework.core.io.FileSystemResource;
import io.gpupool.config.GpuPoolProperties;
import io.gpupool.config.GpuPoolSettings;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.json.JsonMapper;

/**
 * The deployment profiles in {@code config/} (what the image and the Helm chart run with) against the
 * configuration metadata of the application and of Spring Boot:
 * <ol>
 *   <li>every key they set is a property something binds (Spring ignores a misspelt key silently,
 *       so a typo would leave a production setting at its default without a word);</li>
 *   <li>every {@code gpupool.*} property is documented in {@code config/application.yml} (set, or
 *       as a comment like the operator password), so the file stays the complete reference;</li>
 *   <li>each deployment combination ({@code production} with {@code host} or {@code cuda}) binds
 *       into {@link GpuPoolProperties} and passes its validation, so no profile only fails on the
 *       node it was meant for (the CUDA one cannot start here).</li>
 * </ol>
 * The metadata is what {@code spring-boot-configuration-processor} and Boot's jars publish in
 * {@code META-INF/spring-configuration-metadata.json}.
 */
class ConfigProfilesTest {

    private static final Path CONFIG = Path.of("config");
    private static final JsonMapper JSON = JsonMapper.builder().build();

    /** Property name to its declared type, over every metadata file on the class path. */
    private static final Map<String, String> PROPERTIES = new HashMap<>();

    @BeforeAll
    static void readMetadata() throws IOException {
        Enumeration<URL> files = ConfigProfilesTest.class.getClassLoader()
            .getResources("META-INF/spring-configuration-metadata.json");
        while (files.hasMoreElements()) {
            try (InputStream in = files.nextElement().openStream()) {
                for (JsonNode property : JSON.readTree(in).path("properties")) {
                    PROPERTIES.put(property.path("name").asString(), property.path("type").asString(""));
                }
            }
        }
        assertThat(PROPERTIES).as("configuration metadata on the class path").containsKey("server.port");
    }

    @Test
    void everyKeyOfEveryProfileIsABindableProperty() throws IOException {
        List<String> unknown = new ArrayList<>();
        for (Path file : profileFiles()) {
            for (String key : keys(file)) {
                if (!isKnown(key)) {
                    unknown.add(file.getFileName() + ": " + key);
                }
            }
        }
        assertThat(unknown).as("keys no configuration property binds (misspelt or removed?)").isEmpty();
    }

    @Test
    void applicationYmlDocumentsEveryGpupoolSetting() throws IOException {
        String text = Files.readString(CONFIG.resolve("application.yml"));
        TreeSet<String> missing = new TreeSet<>();
        for (String property : PROPERTIES.keySet()) {
            if (property.startsWith("gpupool.")) {
                String leaf = property.substring(property.lastIndexOf('.') + 1);
                if (!text.contains(" " + leaf + ":")) {
                    missing.add(property);
                }
            }
        }
        assertThat(PROPERTIES.keySet()).as("gpupool properties in the metadata").contains("gpupool.memory.mode");
        assertThat(missing).as("settings config/application.yml does not mention").isEmpty();
    }

    @Test
    void theThreeProfilesShipAndTheChartCarriesTheSameFiles() throws IOException {
        Path chartCopy = Path.of("helm", "gpupool", "files", "config");
        for (Path file : profileFiles()) {
            assertThat(chartCopy.resolve(file.getFileName()))
                .as("chart copy of %s (run tools/sync-helm-config.sh)", file)
                .hasSameTextualContentAs(file);
        }
        assertThat(profileFiles()).extracting(p -> p.getFileName().toString())
            .contains("application-host.yml", "application-cuda.yml", "application-production.yml");
    }

    @ParameterizedTest
    @ValueSource(strings = {"host", "cuda"})
    void productionWithEachBackendProfileIsAValidConfiguration(String backendProfile) throws IOException {
        MutablePropertySources sources = new MutablePropertySources();
        // Spring's order: later profiles override earlier ones, all override application.yml.
        for (String name : List.of("application-" + backendProfile + ".yml", "application-production.yml",
                "application.yml")) {
            Path file = CONFIG.resolve(name);
            new YamlPropertySourceLoader().load(name, new FileSystemResource(file)).forEach(sources::addLast);
        }
        GpuPoolProperties properties = new Binder(ConfigurationPropertySources.from(sources))
            .bindOrCreate("gpupool", GpuPoolProperties.class);

        GpuPoolSettings settings = properties.toSettings();

        assertThat(settings.backend().name()).isEqualToIgnoringCase(backendProfile);
    }

    private static boolean isKnown(String key) {
        String plain = key.replaceAll("\\[\\d+]", "");
        if (PROPERTIES.containsKey(plain)) {
            return true;
        }
        // Map-typed properties (logging.level, management.metrics.tags, ...) take any sub-key.
        for (int dot = plain.lastIndexOf('.'); dot > 0; dot = plain.lastIndexOf('.', dot - 1)) {
            String type = PROPERTIES.get(plain.substring(0, dot));
            if (type != null && type.startsWith("java.util.Map")) {
                return true;
            }
        }
        return false;
    }

    private static List<Path> profileFiles() throws IOException {
        try (Stream<Path> files = Files.list(CONFIG)) {
            return files.filter(p -> p.getFileName().toString().matches("application.*\\.yml")).sorted().toList();
        }
    }

    private static List<String> keys(Path file) throws IOException {
        List<String> keys = new ArrayList<>();
        for (PropertySource<?> source : new YamlPropertySourceLoader().load(file.toString(), new FileSystemResource(file))) {
            keys.addAll(List.of(((EnumerablePropertySource<?>) source).getPropertyNames()));
        }
        return keys;
    }
}
