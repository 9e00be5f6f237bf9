package io.gpupool.lab;

import tools.jackson.databind.JsonNode;
import tools.jackson.databind.json.JsonMapper;
import tools.jackson.databind.node.ArrayNode;
import tools.jackson.databind.node.ObjectNode;

import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * The same build, the same workload, one allocator mode after the other: starts the server as its own
 * process per mode ({@code gpupool.memory.mode}) on free loopback ports, waits until it is ready, runs
 * the {@link LoadDriver} against it, stops it, and writes a combined JSON, a markdown table and an
 * HTML page. Run by {@code tools/compare-allocators.sh}, from a checkout or from inside the GPU bundle.
 *
 * <pre>
 *   for round in 1..rounds (the order of the modes turns by one each round, so no mode always runs first):
 *     for mode in modes:
 *       1. ports P, M  = two free loopback ports
 *       2. java -cp SERVER_CP io.gpupool.GpuPoolApplication --gpupool.memory.mode=mode ... (log: server-mode.log)
 *       3. wait for /v2/health/ready = 200 (warm-up done), at most --startup-timeout
 *       4. LoadDriver: warm-up, then measured run (mode.json, mode.html)
 *       5. SIGTERM, wait; note whether the log reports blocks still outstanding at close
 *   comparison.json, comparison.md, comparison.html
 * </pre>
 * With {@code --rounds N} (N &gt; 1) the files of a run carry the round ({@code mode-r2.json}), ratios are
 * taken within each round (against the reference mode's run of the same round, which cancels slow
 * drift of the machine), and a summary gives each mode's median, lowest and highest throughput and
 * ratios over the rounds: one 25 s run moves by about 0.5 % on the H200, too much to settle a 1 % question.
 *
 * Options of its own (everything else goes to every LoadDriver run): {@code --server-cp}, {@code --java},
 * {@code --jvm-opts}, {@code --models}, {@code --backend}, {@code --modes}, {@code --out-dir},
 * {@code --startup-timeout}, {@code --server-args} (space-separated extra server arguments), {@code --rounds}.
 */
public final class AllocatorComparison {

    private static final JsonMapper JSON = JsonMapper.builder().build();

    public static void main(String[] args) throws Exception {
        Map<String, String> values = new LinkedHashMap<>();
        for (int i = 0; i < args.length; i++) {
            String key = args[i].substring(2);
            int eq = key.indexOf('=');
            if (eq >= 0) {
                values.put(key.substring(0, eq), key.substring(eq + 1));
            } else if (LoadDriver.isFlag(key)) {
                values.put(key, "true");
            } else {
                values.put(key, args[++i]);
            }
        }
        String serverCp = require(values, "server-cp");
        String java = values.getOrDefault("java", Path.of(System.getProperty("java.home"), "bin", "java").toString());
        values.remove("java");
        String jvmOpts = take(values, "jvm-opts", "");
        String models = take(values, "models", "models");
        String backend = take(values, "backend", "host");
        List<String> modes = List.of(take(values, "modes", "TWO_LEVEL,GLOBAL_ONLY,BEST_FIT,DIRECT").split(","));
        modes.forEach(Variant::parse);                             // a bad entry fails before any server starts
        Path outDir = Path.of(take(values, "out-dir", "target/compare"));
        Duration startup = LoadDriver.duration("--startup-timeout", take(values, "startup-timeout", "240s"));
        String serverArgs = take(values, "server-args", "");
        int rounds = Integer.parseInt(take(values, "rounds", "1"));
        if (rounds < 1 || rounds > 100) {
            throw new IllegalArgumentException("--rounds " + rounds + " is invalid; allowed: 1 to 100");
        }
        boolean check = Boolean.parseBoolean(values.getOrDefault("check", "false"));
        Files.createDirectories(outDir);

        List<JsonNode> reports = new ArrayList<>();
        ObjectNode combined = JSON.createObjectNode();
        combined.put("tool", "gpupool AllocatorComparison");
        combined.put("started_at", Instant.now().toString());
        combined.put("backend", backend);
        combined.put("models", models);
        combined.put("server_args", serverArgs);
        combined.put("jvm_opts", jvmOpts);
        ArrayNode rows = combined.putArray("modes");
        combined.put("rounds", rounds);
        boolean allMet = true;
        for (int round = 1; round <= rounds; round++) {
            for (int m = 0; m < modes.size(); m++) {
                Variant variant = Variant.parse(modes.get((m + round - 1) % modes.size()));
                String mode = variant.label();
                String name = rounds == 1 ? variant.fileName() : variant.fileName() + "-r" + round;
                ObjectNode row = rows.addObject();
                row.put("mode", mode);
                row.put("file", name);
                if (!variant.settings().isEmpty()) {
                    row.put("allocator_mode", variant.mode());
                }
                if (rounds > 1) {
                    row.put("round", round);
                }
                int port = freePort();
                int management = freePort();
                List<String> command = new ArrayList<>();
                command.add(java);
                command.add("--enable-native-access=ALL-UNNAMED");
                for (String opt : jvmOpts.split(" ")) {
                    if (!opt.isBlank()) {
                        command.add(opt);
                    }
                }
                command.addAll(variant.jvmSettings());
                command.addAll(List.of("-cp", serverCp, "io.gpupool.GpuPoolApplication",
                        "--server.address=127.0.0.1", "--server.port=" + port,
                        "--management.server.address=127.0.0.1", "--management.server.port=" + management,
                        "--gpupool.backend=" + backend, "--gpupool.memory.mode=" + variant.mode(),
                        "--gpupool.models.path=" + models));
                variant.serverSettings().forEach(setting -> command.add("--" + setting));
                for (String arg : serverArgs.split(" ")) {
                    if (!arg.isBlank()) {
                        command.add(arg);
                    }
                }
                Path log = outDir.resolve("server-" + name + ".log");
                System.err.printf(Locale.ROOT, "[compare] %s: starting the server on 127.0.0.1:%d (management %d), log %s%n",
                        mode, port, management, log);
                long started = System.nanoTime();
                Process server = new ProcessBuilder(command).redirectErrorStream(true).redirectOutput(log.toFile()).start();
                try {
                    String failure = awaitReady(server, port, startup);
                    row.put("startup_s", Math.round((System.nanoTime() - started) / 1e7) / 100.0);
                    if (failure != null) {
                        System.err.println("[compare] " + mode + ": " + failure + " (see " + log + ")");
                        row.put("error", failure);
                        allMet = false;
                        continue;
                    }
                    Map<String, String> driverOptions = new LinkedHashMap<>(values);
                    driverOptions.remove("check");
                    driverOptions.put("url", "http://127.0.0.1:" + port);
                    driverOptions.put("actuator", "http://127.0.0.1:" + management);
                    driverOptions.put("label", name);
                    driverOptions.put("out", outDir.resolve(name + ".json").toString());
                    LoadDriver.Options options = LoadDriver.fromMap(driverOptions);
                    if (!driverOptions.isEmpty()) {
                        throw new IllegalArgumentException("unknown option(s) " + driverOptions.keySet());
                    }
                    LoadDriver.Result result = new LoadDriver(options, System.err).run();
                    result.write(options);
                    System.err.println(result.summaryLine());
                    reports.add(result.report());
                    fillRow(row, result.report());
                    row.put("expectations_met", result.expectationsMet());
                    allMet &= result.expectationsMet();
                } finally {
                    server.destroy();
                    if (!server.waitFor(60, TimeUnit.SECONDS)) {
                        server.destroyForcibly().waitFor();
                        row.put("shutdown", "killed after 60 s");
                    }
                    String text = Files.readString(log);
                    row.put("outstanding_at_close", text.contains("still outstanding") || text.contains("outstanding block"));
                }
            }
        }
        addRatios(rows);
        if (rounds > 1) {
            combined.set("summary", summarize(rows, modes.stream().map(entry -> Variant.parse(entry).label()).toList()));
        }
        Files.writeString(outDir.resolve("comparison.json"), JSON.writerWithDefaultPrettyPrinter().writeValueAsString(combined));
        String markdown = markdown(combined);
        Files.writeString(outDir.resolve("comparison.md"), markdown);
        Files.writeString(outDir.resolve("comparison.html"),
                LoadReportHtml.renderComparison("gpupool allocator comparison (" + backend + ")", reports));
        System.out.print(markdown);
        System.out.println("Written: " + outDir.toAbsolutePath().resolve("comparison.{json,md,html}")
                + " and one <mode>.json/.html and server-<mode>.log per mode");
        if (check && !allMet) {
            System.exit(1);
        }
    }

    static void fillRow(ObjectNode row, JsonNode report) {
        JsonNode latency = report.path("latency_ms");
        row.put("throughput_rps", report.path("throughput_rps").asDouble());
        for (String q : List.of("p50", "p90", "p99", "p99.9", "max")) {
            row.put(q + "_ms", latency.path(q).asDouble());
        }
        row.put("requests", report.path("requests").asLong());
        row.put("ok", report.path("status").path("200").asLong());
        row.set("status", report.path("status"));
        row.put("unexpected_5xx", report.path("unexpected_5xx").asLong());
        long peakReserved = 0;
        long peakAllocated = 0;
        long peakRequested = 0;
        for (JsonNode device : report.path("pool_after").path("devices")) {
            peakReserved += device.path("peakReservedBytes").asLong();
            peakAllocated += device.path("peakAllocatedBytes").asLong();
            peakRequested += device.path("peakRequestedBytes").asLong();
        }
        // Every mode lists its devices (modes without a pool show their allocator's numbers); none
        // listed means the endpoint could not be read, and the table says n/a rather than 0.
        row.put("pool_listed", report.path("pool_after").path("devices").size() > 0);
        if (report.path("pool_after").has("error")) {
            row.put("pool_error", report.path("pool_after").path("error").asString(""));
        }
        row.put("pool_peak_reserved_bytes", peakReserved);
        row.put("pool_peak_allocated_bytes", peakAllocated);
        row.put("pool_peak_requested_bytes", peakRequested);
        row.put("allocated_after_drain_bytes", LoadDriver.allocatedBytes(report.path("pool_after_drain")));
        row.put("ready_after", report.path("ready_after").asInt());
    }

    /**
     * Throughput and p99 of each mode relative to DIRECT (and CUDA_ASYNC where it ran), each run
     * against the reference's run of the same round (rows without a round are round 1).
     */
    static void addRatios(ArrayNode rows) {
        for (String base : List.of("DIRECT", "CUDA_ASYNC")) {
            Map<Integer, JsonNode> references = new LinkedHashMap<>();
            for (JsonNode row : rows) {
                if (row.path("mode").asString("").equals(base) && row.has("throughput_rps")) {
                    references.put(row.path("round").asInt(1), row);
                }
            }
            for (Map.Entry<Integer, JsonNode> entry : references.entrySet()) {
                JsonNode reference = entry.getValue();
                if (reference.path("throughput_rps").asDouble() <= 0) {
                    continue;
                }
                String suffix = base.toLowerCase(Locale.ROOT);
                for (JsonNode node : rows) {
                    if (node instanceof ObjectNode row && row.has("throughput_rps")
                            && row.path("round").asInt(1) == entry.getKey()) {
                        // three decimals: the question is often whether a ratio is above 1.000
                        row.put("throughput_vs_" + suffix, Math.round(1000 * row.path("throughput_rps").asDouble()
                                / reference.path("throughput_rps").asDouble()) / 1000.0);
                        row.put("p99_vs_" + suffix, Math.round(1000 * row.path("p99_ms").asDouble()
                                / reference.path("p99_ms").asDouble()) / 1000.0);
                    }
                }
            }
        }
    }

    /**
     * Per mode over the rounds: median, lowest and highest throughput, median p99, and the median,
     * lowest and highest of its per-round ratios against DIRECT and CUDA_ASYNC where they ran.
     */
    static ArrayNode summarize(ArrayNode rows, List<String> modes) {
        ArrayNode summary = JSON.createArrayNode();
        for (String mode : modes) {
            List<JsonNode> runs = new ArrayList<>();
            for (JsonNode row : rows) {
                if (row.path("mode").asString("").equals(mode) && row.has("throughput_rps")) {
                    runs.add(row);
                }
            }
            ObjectNode entry = summary.addObject();
            entry.put("mode", mode);
            entry.put("runs", runs.size());
            if (runs.isEmpty()) {
                continue;
            }
            spread(entry, "throughput_rps", runs, 1);
            entry.put("p99_ms_median", median(values(runs, "p99_ms")));
            if (runs.stream().allMatch(r -> r.path("pool_listed").asBoolean())) {
                spread(entry, "pool_peak_reserved_bytes", runs, 1);
            }
            for (String ratio : List.of("throughput_vs_direct", "throughput_vs_cuda_async")) {
                if (runs.stream().allMatch(r -> r.has(ratio))) {
                    spread(entry, ratio, runs, 1000);
                }
            }
        }
        return summary;
    }

    private static void spread(ObjectNode entry, String field, List<JsonNode> runs, int roundTo) {
        double[] v = values(runs, field);
        entry.put(field + "_median", Math.round(median(v) * roundTo * 10) / (roundTo * 10.0));
        entry.put(field + "_min", java.util.Arrays.stream(v).min().orElse(0));
        entry.put(field + "_max", java.util.Arrays.stream(v).max().orElse(0));
    }

    private static double[] values(List<JsonNode> runs, String field) {
        return runs.stream().mapToDouble(r -> r.path(field).asDouble()).sorted().toArray();
    }

    private static double median(double[] sorted) {
        int n = sorted.length;
        return n == 0 ? 0 : n % 2 == 1 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
    }

    static String markdown(JsonNode combined) {
        StringBuilder md = new StringBuilder();
        md.append(String.format(Locale.ROOT, "Backend `%s`, started %s.%n%n", combined.path("backend").asString(""),
                combined.path("started_at").asString("")));
        md.append("| mode | req/s | p50 ms | p90 ms | p99 ms | p99.9 ms | × DIRECT req/s | × DIRECT p99 | not 200 | unexpected 5xx | pool peak reserved | pool peak allocated | allocated after drain | ready after |\n");
        md.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
        for (JsonNode row : combined.path("modes")) {
            if (row.has("error")) {
                md.append("| ").append(row.path("mode").asString("")).append(" | failed: ")
                        .append(row.path("error").asString("")).append(" |||||||||||||\n");
                continue;
            }
            boolean pool = row.path("pool_listed").asBoolean();
            String notRead = row.has("pool_error") ? "n/a (not read)" : "n/a (not listed)";
            String label = row.path("mode").asString("") + (row.has("round") ? " (round " + row.path("round").asInt() + ")" : "");
            md.append(String.format(Locale.ROOT, "| %s | %.1f | %.2f | %.2f | %.2f | %.2f | %s | %s | %d | %d | %s | %s | %s | %d |%n",
                    label, row.path("throughput_rps").asDouble(), row.path("p50_ms").asDouble(),
                    row.path("p90_ms").asDouble(), row.path("p99_ms").asDouble(), row.path("p99.9_ms").asDouble(),
                    row.has("throughput_vs_direct") ? String.format(Locale.ROOT, "%.2f", row.path("throughput_vs_direct").asDouble()) : "-",
                    row.has("p99_vs_direct") ? String.format(Locale.ROOT, "%.2f", row.path("p99_vs_direct").asDouble()) : "-",
                    row.path("requests").asLong() - row.path("ok").asLong(), row.path("unexpected_5xx").asLong(),
                    !pool ? notRead : mebibytes(row.path("pool_peak_reserved_bytes").asLong()),
                    !pool ? "n/a" : mebibytes(row.path("pool_peak_allocated_bytes").asLong()),
                    !pool ? "n/a" : row.path("allocated_after_drain_bytes").asLong() + " B", row.path("ready_after").asInt()));
        }
        if (combined.has("summary")) {
            md.append(String.format(Locale.ROOT, "%nOver %d rounds (median, lowest–highest; ratios taken within each round):%n%n",
                    combined.path("rounds").asInt()));
            md.append("| mode | runs | req/s | × DIRECT | × CUDA_ASYNC | p99 ms (median) | peak reserved MiB |\n");
            md.append("|---|---:|---:|---:|---:|---:|---:|\n");
            for (JsonNode entry : combined.path("summary")) {
                md.append(String.format(Locale.ROOT, "| %s | %d | %s | %s | %s | %s | %s |%n", entry.path("mode").asString(""),
                        entry.path("runs").asInt(), range(entry, "throughput_rps", "%.1f"),
                        range(entry, "throughput_vs_direct", "%.2f"), range(entry, "throughput_vs_cuda_async", "%.3f"),
                        entry.has("p99_ms_median") ? String.format(Locale.ROOT, "%.1f", entry.path("p99_ms_median").asDouble()) : "-",
                        mebibytes(entry, "pool_peak_reserved_bytes")));
            }
        }
        return md.toString();
    }

    private static String mebibytes(long bytes) {
        return String.format(Locale.ROOT, "%.0f MiB", bytes / 1048576.0);
    }

    /** Median (lowest–highest) of a byte field in MiB, or "-" when some run was not read. */
    private static String mebibytes(JsonNode entry, String field) {
        if (!entry.has(field + "_median")) {
            return "-";
        }
        double mib = 1024.0 * 1024.0;
        return String.format(Locale.ROOT, "%.0f (%.0f–%.0f)", entry.path(field + "_median").asDouble() / mib,
                entry.path(field + "_min").asDouble() / mib, entry.path(field + "_max").asDouble() / mib);
    }

    private static String range(JsonNode entry, String field, String format) {
        if (!entry.has(field + "_median")) {
            return "-";
        }
        return String.format(Locale.ROOT, format + " (" + format + "–" + format + ")", entry.path(field + "_median").asDouble(),
                entry.path(field + "_min").asDouble(), entry.path(field + "_max").asDouble());
    }

    /** Null when the server answered ready in time, else why not. */
    private static String awaitReady(Process server, int port, Duration timeout) throws InterruptedException {
        HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(2)).build();
        URI ready = URI.create("http://127.0.0.1:" + port + "/v2/health/ready");
        long deadline = System.nanoTime() + timeout.toNanos();
        while (System.nanoTime() < deadline) {
            if (!server.isAlive()) {
                return "server exited with status " + server.exitValue() + " before it was ready";
            }
            try {
                if (http.send(HttpRequest.newBuilder(ready).timeout(Duration.ofSeconds(5)).GET().build(),
                        HttpResponse.BodyHandlers.discarding()).statusCode() == 200) {
                    return null;
                }
            } catch (IOException notYetListening) {
                // keep waiting
            }
            Thread.sleep(250);
        }
        return "server not ready within " + timeout;
    }

    private static int freePort() throws IOException {
        return FreePorts.pick();
    }

    private static String require(Map<String, String> values, String key) {
        String value = values.remove(key);
        if (value == null) {
            throw new IllegalArgumentException("--" + key + " is required");
        }
        return value;
    }

    private static String take(Map<String, String> values, String key, String fallback) {
        String value = values.remove(key);
        return value == null ? fallback : value;
    }

    /**
     * One entry of {@code --modes}: an allocator mode, optionally with server settings that make it a
     * variant of its own in the tables, e.g. {@code TWO_LEVEL+gpupool.memory.mapped-slack=0.25}
     * (settings separated by {@code +}, each passed to the server as {@code --key=value}; one written
     * {@code -Dkey=value} goes to the server's JVM as a system property instead).
     */
    record Variant(String label, String mode, List<String> settings) {

        /** Settings passed as server arguments ({@code key=value}). */
        List<String> serverSettings() {
            return settings.stream().filter(setting -> !setting.startsWith("-D")).toList();
        }

        /** Settings passed to the JVM ({@code -Dkey=value}). */
        List<String> jvmSettings() {
            return settings.stream().filter(setting -> setting.startsWith("-D")).toList();
        }

        static Variant parse(String entry) {
            String trimmed = entry.trim();
            String[] parts = trimmed.split("\\+");
            String mode = parts[0].trim();
            try {
                io.gpupool.memory.metric.AllocatorMode.valueOf(mode);
            } catch (IllegalArgumentException e) {
                throw new IllegalArgumentException("--modes entry '" + trimmed + "': unknown allocator mode '" + mode
                        + "'; allowed: " + java.util.Arrays.toString(io.gpupool.memory.metric.AllocatorMode.values()));
            }
            List<String> settings = new ArrayList<>();
            for (int i = 1; i < parts.length; i++) {
                String setting = parts[i].trim();
                if (!setting.matches("(-D)?[A-Za-z0-9._\\-\\[\\]]+=[^\\s]+")) {
                    throw new IllegalArgumentException("--modes entry '" + trimmed + "': setting '" + setting
                            + "' is not key=value (e.g. gpupool.memory.mapped-slack=0.25) or -Dkey=value");
                }
                settings.add(setting);
            }
            return new Variant(trimmed, mode, List.copyOf(settings));
        }

        /** Longest file-name stem kept whole; file systems refuse names over 255 bytes (server-NAME-rN.log). */
        static final int MAX_FILE_STEM = 160;

        /**
         * The label with every character other than letters, digits, '.', '_' and '-' made '_' (file names). A
         * label longer than {@value #MAX_FILE_STEM} characters (a long list of indexed settings) keeps its start
         * and ends in a hash of the whole label, so two long variants still get different files; readers take
         * the name from the row's "file" field instead of rebuilding it.
         */
        String fileName() {
            String safe = label.replaceAll("[^A-Za-z0-9._-]", "_");
            if (safe.length() <= MAX_FILE_STEM) {
                return safe;
            }
            return safe.substring(0, MAX_FILE_STEM - 9) + "_" + String.format("%08x", label.hashCode());
        }
    }
}
