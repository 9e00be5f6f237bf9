package io.gpupool.lab;

import tools.jackson.databind.JsonNode;
import tools.jackson.databind.json.JsonMapper;
import tools.jackson.databind.node.ArrayNode;
import tools.jackson.databind.node.ObjectNode;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Locale;
import java.util.Map;

/**
 * Condenses JMH's JSON result file into one record per benchmark (name, parameters, threads,
 * score, error, unit) and prints it as a table: {@code JmhSummary target/jmh.json target/jmh-summary.json}.
 */
public final class JmhSummary {

    private JmhSummary() {
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 2) {
            throw new IllegalArgumentException("usage: JmhSummary <jmh.json> <summary.json>");
        }
        JsonMapper mapper = JsonMapper.builder().build();
        JsonNode results = mapper.readTree(Files.readString(Path.of(args[0])));
        ArrayNode summary = mapper.createArrayNode();
        for (JsonNode run : results) {
            ObjectNode line = summary.addObject();
            String benchmark = run.get("benchmark").asString();
            line.put("benchmark", benchmark.substring(benchmark.lastIndexOf('.', benchmark.lastIndexOf('.') - 1) + 1));
            StringBuilder params = new StringBuilder();
            JsonNode p = run.get("params");
            if (p != null) {
                for (Map.Entry<String, JsonNode> e : p.properties()) {
                    line.put(e.getKey(), e.getValue().asString());
                    params.append(e.getKey()).append('=').append(e.getValue().asString()).append(' ');
                }
            }
            line.put("threads", run.get("threads").asInt());
            JsonNode metric = run.get("primaryMetric");
            double score = number(metric.get("score"));
            double error = number(metric.get("scoreError"));
            line.put("score", score);
            line.put("error", error);
            line.put("unit", metric.get("scoreUnit").asString());
            System.out.printf(Locale.ROOT, "%-32s %-36s threads=%-3d %12.3f ± %8.3f %s%n", line.get("benchmark").asString(),
                    params.toString().strip(), run.get("threads").asInt(), score, error,
                    metric.get("scoreUnit").asString());
        }
        Files.writeString(Path.of(args[1]), mapper.writerWithDefaultPrettyPrinter().writeValueAsString(summary));
    }

    /** JMH writes "NaN" as a string when there were too few iterations for an error estimate. */
    private static double number(JsonNode node) {
        return node.isNumber() ? node.asDouble() : Double.parseDouble(node.asString());
    }
}
