package io.gpupool.deploy;

import io.gpupool.WebTestClients;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.context.TypeExcludeFilter;
import org.springframework.boot.context.properties.ConfigurationPropertiesScan;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.web.server.LocalManagementPort;
import org.springframework.boot.test.web.server.LocalServerPort;
import org.springframework.context.annotation.ComponentScan;
import org.springframework.context.annotation.FilterType;
import org.springframework.http.MediaType;
import org.springframework.test.web.reactive.server.WebTestClient;
import org.yaml.snakeyaml.Yaml;

import io.gpupool.GpuPoolApplication;
import io.gpupool.serving.ModelRegistry;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.json.JsonMapper;

/**
 * The chart's Grafana dashboard and alert rules query what a running server publishes. The queries
 * are read from the chart's own files (the dashboard JSON, the rules YAML); the server is the whole
 * application on the host backend with the shipped models, scraped on {@code /actuator/prometheus}
 * after successful and failed inferences, as Prometheus would see it. A meter renamed in the code, or
 * a panel that names a meter or a tag value that does not exist, fails here instead of showing an
 * empty graph or an alert that can never fire.
 */
@SpringBootTest(classes = MonitoringQueriesTest.Application.class,
        webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT,
        properties = {"gpupool.backend=host", "management.server.port=0"})
@TestInstance(TestInstance.Lifecycle.PER_CLASS) // one round of inferences and one scrape for all checks
class MonitoringQueriesTest {

    static final Path DASHBOARD = Path.of("helm/gpupool/files/grafana/gpupool-dashboard.json");
    static final Path ALERTS = Path.of("helm/gpupool/files/prometheus/gpupool-alerts.yaml");
    static final Path CHART_README = Path.of("helm/gpupool/README.md");

    /**
     * Series that come from other exporters, never from our server: the one place that lists them,
     * each with its source. Names of meters not merged yet do not belong here.
     */
    static final Map<String, String> EXTERNAL = Map.of(
            "kube_pod_status_ready", "kube-state-metrics",
            "kube_pod_container_info", "kube-state-metrics");

    /**
     * Metrics that panels query before the server publishes them (meters of work not merged yet),
     * read from the one file that lists them; see its header for the rule.
     */
    static final Path PENDING = Path.of("src/test/resources/monitoring/pending-metrics.txt");

    /** Labels that Prometheus adds when it scrapes a pod (the server does not publish them). */
    static final Set<String> SCRAPE_LABELS = Set.of("namespace", "pod", "job", "instance", "service", "endpoint",
            "container");

    /** Generous: CI shares two cores, and a slow answer is not what this test is about. */
    private static final Duration TIMEOUT = Duration.ofSeconds(60);
    private static final JsonMapper JSON = JsonMapper.builder().build();
    private static final Pattern HELM_ACTION = Pattern.compile("\\{\\{.*?}}");
    private static final Pattern LABEL_VALUES = Pattern.compile(
            "label_values\\(\\s*(?:([a-zA-Z_:][a-zA-Z0-9_:]*)\\s*(\\{[^}]*})?\\s*,)?\\s*([a-zA-Z_][a-zA-Z0-9_]*)\\s*\\)");
    private static final Pattern SERIES_LABEL = Pattern.compile("([a-zA-Z_][a-zA-Z0-9_]*)=\"((?:[^\"\\\\]|\\\\.)*)\"");

    /** {@link GpuPoolApplication} as it ships, without the other suites' test configurations. */
    @SpringBootConfiguration
    @EnableAutoConfiguration
    @ConfigurationPropertiesScan(basePackageClasses = GpuPoolApplication.class)
    @ComponentScan(basePackageClasses = GpuPoolApplication.class, excludeFilters = {
            @ComponentScan.Filter(type = FilterType.CUSTOM, classes = TypeExcludeFilter.class),
            @ComponentScan.Filter(type = FilterType.ANNOTATION, classes = SpringBootConfiguration.class)})
    static class Application {
    }

    @LocalServerPort
    int serverPort;

    @LocalManagementPort
    int managementPort;

    @Autowired
    ModelRegistry registry;

    /** Metric name to the label sets of its series, as scraped after the inferences. */
    Map<String, List<Map<String, String>>> scraped;

    @BeforeAll
    void inferThenScrape() throws InterruptedException {
        long deadline = System.nanoTime() + Duration.ofSeconds(120).toNanos();
        while (!registry.isWarmedUp()) {
            assertThat(System.nanoTime()).as("warm-up finished within 120 s").isLessThan(deadline);
            Thread.sleep(20);
        }
        WebTestClient api = WebTestClients.to("http://localhost:" + serverPort, TIMEOUT);
        for (int i = 0; i < 3; i++) {
            infer(api, "iris-mlp", """
                    {"inputs": [{"name": "input", "shape": [2, 4], "datatype": "FP32",
                      "data": [5.1, 3.5, 1.4, 0.2, 6.7, 3.0, 5.2, 2.3]}]}""").expectStatus().isOk();
            infer(api, "tiny-bert", """
                    {"inputs": [{"name": "input_ids", "shape": [1, 5], "datatype": "INT64",
                      "data": [1, 7, 42, 9, 2]}]}""").expectStatus().isOk();
        }
        infer(api, "iris-mlp", "{\"inputs\": [").expectStatus().isBadRequest();
        infer(api, "no-such-model", "{\"inputs\": []}").expectStatus().isNotFound();

        String body = WebTestClients.to("http://localhost:" + managementPort, TIMEOUT)
                .get().uri("/actuator/prometheus").exchange()
                .expectStatus().isOk().expectBody(String.class).returnResult().getResponseBody();
        scraped = parseExposition(body);
    }

    @Test
    void everyMetricTheDashboardQueriesIsPublished() throws IOException {
        Map<String, List<String>> queries = dashboardQueries();
        assertThat(queries).as("dashboard panels with queries").isNotEmpty();
        Set<String> pending = pendingMetrics();
        List<String> missing = new ArrayList<>();
        Set<String> read = new TreeSet<>();
        queries.forEach((panel, exprs) -> {
            for (String expr : exprs) {
                for (String name : PromQl.metricNames(expr)) {
                    read.add(name);
                    if (!scraped.containsKey(name) && !pending.contains(name)) {
                        missing.add(panel + ": " + name);
                    }
                }
            }
        });
        assertThat(missing).as("metrics the dashboard queries but /actuator/prometheus lacks").isEmpty();
        assertThat(read).as("every pending metric is still queried").containsAll(pending);
        // The panels the operators were promised, by the meters they read.
        assertThat(read).contains("gpupool_memory_reserved_bytes", "gpupool_memory_allocated_bytes",
                "gpupool_memory_cached_bytes", "gpupool_memory_cap_bytes", "gpupool_fragmentation",
                "gpupool_free_largest_bytes", "gpupool_local_hit_ratio", "gpupool_maps_total", "gpupool_unmaps_total",
                "gpupool_allocation_latency_buckets_total", "gpupool_recoveries_total", "gpupool_failures_total",
                "gpupool_inference_requests_total", "gpupool_inference_compute_seconds_bucket",
                "gpupool_inference_queue_wait_seconds_bucket", "gpupool_inference_queue_depth",
                "gpupool_batch_size_requests_bucket", "gpupool_memory_admission_waiting_requests",
                "gpupool_memory_workspace_bytes", "gpupool_memory_workspace_captured_bytes", "gpupool_retained_handles",
                "gpupool_memory_retained_bytes", "gpupool_physical_creates_total", "gpupool_physical_releases_total",
                "gpupool_batch_bypassed_requests_total");
    }

    @Test
    void pendingMetricsWaitOnlyWhileTheirFamilyIsUnpublished() throws IOException {
        for (String name : pendingMetrics()) {
            String family = family(name);
            assertThat(scraped.keySet().stream().filter(published -> published.startsWith(family)).sorted().toList())
                    .as("%s is listed in %s, but the server now publishes metrics of %s*: remove the family's names "
                            + "from the list so that their panels are checked", name, PENDING, family)
                    .isEmpty();
        }
    }

    @Test
    void everyDashboardVariableListsValuesOfAPublishedMetricAndLabel() throws IOException {
        JsonNode variables = JSON.readTree(Files.readString(DASHBOARD)).get("templating").get("list");
        int queried = 0;
        for (JsonNode variable : variables) {
            if (!"query".equals(variable.get("type").asString())) {
                continue;
            }
            String query = variable.get("query").isObject() ? variable.get("query").get("query").asString()
                    : variable.get("query").asString();
            Matcher m = LABEL_VALUES.matcher(query);
            assertThat(m.matches()).as("variable %s is a label_values() query: %s", variable.get("name"), query).isTrue();
            String metric = m.group(1);
            String label = m.group(3);
            assertThat(scraped).as("variable %s reads %s", variable.get("name"), metric).containsKey(metric);
            if (!SCRAPE_LABELS.contains(label)) {
                assertThat(scraped.get(metric)).as("series of %s with label %s", metric, label)
                        .anySatisfy(series -> assertThat(series).containsKey(label));
            }
            queried++;
        }
        assertThat(queried).as("query variables (namespace, pod, device, model)").isEqualTo(4);
    }

    @Test
    void everyMetricTheAlertRulesQueryIsPublishedOrComesFromANamedExporter() throws IOException {
        Map<String, String> rules = alertExpressions();
        assertThat(rules.keySet()).containsExactlyInAnyOrder("GpupoolPoolNearCap", "GpupoolOutOfMemoryResponses",
                "GpupoolFragmentedWhileFailing", "GpupoolQueueFull", "GpupoolWaitingForMemory", "GpupoolNotReady");
        List<String> missing = new ArrayList<>();
        Set<String> external = new TreeSet<>();
        rules.forEach((alert, expr) -> {
            Set<String> names = PromQl.metricNames(expr);
            assertThat(names).as("metrics of %s", alert).isNotEmpty();
            for (String name : names) {
                if (EXTERNAL.containsKey(name)) {
                    external.add(name);
                } else if (!scraped.containsKey(name)) {
                    missing.add(alert + ": " + name);
                }
            }
        });
        assertThat(missing).as("metrics the alert rules query but /actuator/prometheus lacks").isEmpty();
        assertThat(external).as("every external series listed is still used").isEqualTo(EXTERNAL.keySet());
    }

    @Test
    void everyExactLabelMatcherSelectsAPublishedSeries() throws IOException {
        List<String> queries = new ArrayList<>(alertExpressions().values());
        dashboardQueries().values().forEach(queries::addAll);
        Set<String> pending = pendingMetrics();
        List<String> unmatched = new ArrayList<>();
        int checked = 0;
        for (String query : queries) {
            for (PromQl.Selector selector : PromQl.selectors(query)) {
                Map<String, String> wanted = new HashMap<>(selector.equalities());
                wanted.keySet().removeAll(SCRAPE_LABELS);
                if (wanted.isEmpty() || EXTERNAL.containsKey(selector.metric()) || pending.contains(selector.metric())) {
                    continue;
                }
                checked++;
                boolean found = scraped.getOrDefault(selector.metric(), List.of()).stream()
                        .anyMatch(series -> series.entrySet().containsAll(wanted.entrySet()));
                if (!found) {
                    unmatched.add(selector.metric() + wanted);
                }
            }
        }
        // e.g. outcome="out_of_memory" and outcome="overloaded" must be values the server uses.
        assertThat(checked).as("selectors with exact label matchers").isGreaterThanOrEqualTo(5);
        assertThat(unmatched).as("selectors that match no published series").isEmpty();
    }

    @Test
    void everyAlertHasARunbookInTheChartReadme() throws IOException {
        String readme = Files.readString(CHART_README);
        for (String alert : alertExpressions().keySet()) {
            assertThat(readme).as("runbook heading for %s in %s", alert, CHART_README).contains("### " + alert + "\n");
        }
    }

    @Test
    void theNameReaderSeesMetricsNotFunctionsLabelsOrVariables() {
        String expr = """
                histogram_quantile(0.99, sum by (namespace, le) (rate(gpupool_x_bucket{pod=~"$pod", le!="1e9"}[$__rate_interval])))
                / on (pod) group_left (model) max_over_time(other_metric[1h] offset 5m) > 1e-3 and bool up""";
        assertThat(PromQl.metricNames(expr)).containsExactly("gpupool_x_bucket", "other_metric", "up");
        assertThat(PromQl.selectors("a{outcome=\"overloaded\", pod=~\"$pod\", level=\"$level\"} + b"))
                .containsExactly(new PromQl.Selector("a", Map.of("outcome", "overloaded")));
    }

    /** The names listed in {@link #PENDING} (none when the file is gone). */
    static Set<String> pendingMetrics() throws IOException {
        if (!Files.exists(PENDING)) {
            return Set.of();
        }
        Set<String> names = new TreeSet<>();
        for (String line : Files.readAllLines(PENDING)) {
            String name = line.strip();
            if (!name.isEmpty() && !name.startsWith("#")) {
                names.add(name);
            }
        }
        return names;
    }

    /** The first two words of a metric name, e.g. {@code gpupool_batch_}. */
    static String family(String name) {
        int first = name.indexOf('_');
        int second = first < 0 ? -1 : name.indexOf('_', first + 1);
        assertThat(second).as("pending metric %s has a family of two words", name).isPositive();
        return name.substring(0, second + 1);
    }

    private static WebTestClient.ResponseSpec infer(WebTestClient api, String model, String body) {
        return api.post().uri("/v2/models/{model}/infer", model).contentType(MediaType.APPLICATION_JSON)
                .bodyValue(body).exchange();
    }

    /** Panel title to its target expressions, over every panel (rows' nested panels included). */
    static Map<String, List<String>> dashboardQueries() throws IOException {
        Map<String, List<String>> queries = new LinkedHashMap<>();
        collectPanels(JSON.readTree(Files.readString(DASHBOARD)).get("panels"), queries);
        return queries;
    }

    private static void collectPanels(JsonNode panels, Map<String, List<String>> queries) {
        for (JsonNode panel : panels) {
            if (panel.has("panels")) {
                collectPanels(panel.get("panels"), queries);
            }
            if ("row".equals(panel.get("type").asString())) {
                continue;
            }
            List<String> exprs = new ArrayList<>();
            for (JsonNode target : panel.path("targets")) {
                exprs.add(target.get("expr").asString());
            }
            assertThat(exprs).as("queries of panel %s", panel.get("title")).isNotEmpty().allMatch(e -> !e.isBlank());
            queries.put(panel.get("title").asString(), exprs);
        }
    }

    /**
     * Alert name to expression. The file is a Helm template (tpl fills in the thresholds): each action
     * becomes a number, which keeps the YAML and PromQL shape and names no metric.
     */
    @SuppressWarnings("unchecked")
    static Map<String, String> alertExpressions() throws IOException {
        String yaml = HELM_ACTION.matcher(Files.readString(ALERTS)).replaceAll("1");
        Map<String, Object> root = new Yaml().load(yaml);
        Map<String, String> rules = new LinkedHashMap<>();
        for (Map<String, Object> group : (List<Map<String, Object>>) root.get("groups")) {
            for (Map<String, Object> rule : (List<Map<String, Object>>) group.get("rules")) {
                rules.put((String) rule.get("alert"), (String) rule.get("expr"));
            }
        }
        return rules;
    }

    /** Prometheus text exposition: metric name to the label sets of its samples. */
    static Map<String, List<Map<String, String>>> parseExposition(String body) {
        Map<String, List<Map<String, String>>> series = new HashMap<>();
        for (String line : body.split("\n")) {
            if (line.isBlank() || line.startsWith("#")) {
                continue;
            }
            int brace = line.indexOf('{');
            int space = line.indexOf(' ');
            String name = line.substring(0, brace >= 0 && brace < space ? brace : space);
            Map<String, String> labels = new HashMap<>();
            if (brace >= 0 && brace < space) {
                Matcher m = SERIES_LABEL.matcher(line.substring(brace, line.lastIndexOf('}') + 1));
                while (m.find()) {
                    labels.put(m.group(1), m.group(2));
                }
            }
            series.computeIfAbsent(name, n -> new ArrayList<>()).add(labels);
        }
        return series;
    }
}
