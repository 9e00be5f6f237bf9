package io.gpupool.lab;

import tools.jackson.databind.JsonNode;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * Renders a load report (or a comparison of several) as one self-contained HTML page: tables plus
 * inline SVG line charts, no script and nothing fetched, so the file can be attached or archived.
 */
final class LoadReportHtml {

    private static final String[] COLOURS = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"};

    private LoadReportHtml() {
    }

    /** One run: summary, statuses, per-second throughput and latency, pool before and after. */
    static String render(JsonNode report) {
        StringBuilder html = head("gpupool load: " + report.path("label").asString(""));
        html.append("<h1>gpupool load run: ").append(escape(report.path("label").asString(""))).append("</h1>\n");
        html.append("<p>").append(escape(report.path("started_at").asString(""))).append("</p>\n<pre>")
                .append(escape(report.path("options").toString())).append("</pre>\n");
        html.append(summaryTable(List.of(report)));
        html.append("<h2>Answers by status</h2>\n<table><tr><th>status</th><th>count</th></tr>\n");
        for (Map.Entry<String, JsonNode> entry : report.path("status").properties()) {
            html.append("<tr><td>").append(escape(entry.getKey())).append("</td><td>").append(entry.getValue().asLong())
                    .append("</td></tr>\n");
        }
        html.append("</table>\n");
        if (!report.path("unexpected").isEmpty()) {
            html.append("<h2 class=bad>Unexpected 5xx by request</h2><pre>")
                    .append(escape(report.path("unexpected").toString())).append("\n")
                    .append(escape(report.path("first_answers").toString())).append("</pre>\n");
        }
        if (!report.path("malformed_not_4xx").isEmpty()) {
            html.append("<h2>Malformed requests not answered with 4xx</h2><pre>")
                    .append(escape(report.path("malformed_not_4xx").toString())).append("</pre>\n");
        }
        JsonNode timeline = report.path("timeline");
        html.append("<h2>Throughput per second (200 answers; other answers dashed)</h2>\n");
        html.append(chart(List.of(series("200/s", timeline, "ok"), series("other/s", timeline, "other")),
                "req/s", true));
        html.append("<h2>Latency per second of start (ms)</h2>\n");
        html.append(chart(List.of(series("p50", timeline, "p50_ms"), series("p99", timeline, "p99_ms")), "ms", false));
        html.append("<h2>Latency histogram (200 answers; bucket upper edges in ms, √2 apart)</h2>\n");
        html.append(bars(report.path("latency_histogram")));
        html.append("<h2>Pool (management port /actuator/gpupool)</h2>\n");
        html.append(poolTable(report));
        return html.append("</body></html>\n").toString();
    }

    /** Several runs side by side (the allocator comparison). */
    static String renderComparison(String title, List<JsonNode> reports) {
        StringBuilder html = head(title);
        html.append("<h1>").append(escape(title)).append("</h1>\n");
        html.append(summaryTable(reports));
        List<Series> throughput = new ArrayList<>();
        List<Series> p99 = new ArrayList<>();
        for (JsonNode report : reports) {
            String label = report.path("label").asString("");
            throughput.add(series(label, report.path("timeline"), "ok"));
            p99.add(series(label, report.path("timeline"), "p99_ms"));
        }
        html.append("<h2>Throughput per second (200 answers)</h2>\n").append(chart(throughput, "req/s", false));
        html.append("<h2>p99 latency per second (ms)</h2>\n").append(chart(p99, "ms", false));
        for (JsonNode report : reports) {
            html.append("<h3>Pool: ").append(escape(report.path("label").asString(""))).append("</h3>\n")
                    .append(poolTable(report));
        }
        return html.append("</body></html>\n").toString();
    }

    private static StringBuilder head(String title) {
        return new StringBuilder("""
                <!doctype html><html><head><meta charset="utf-8"><title>%s</title><style>
                body{font-family:sans-serif;margin:1.5em;color:#222} table{border-collapse:collapse;margin:.5em 0}
                td,th{border:1px solid #ccc;padding:3px 8px;text-align:right} th{background:#f3f3f3}
                td:first-child{text-align:left} .bad{color:#b00} pre{white-space:pre-wrap;font-size:90%%}
                svg text{font-size:11px;font-family:sans-serif}
                </style></head><body>
                """.formatted(escape(title)));
    }

    private static String summaryTable(List<JsonNode> reports) {
        StringBuilder table = new StringBuilder("<table><tr><th>run</th><th>req/s (200)</th><th>p50 ms</th>"
                + "<th>p90 ms</th><th>p99 ms</th><th>p99.9 ms</th><th>max ms</th><th>requests</th><th>not 200</th>"
                + "<th>unexpected 5xx</th><th>allocated after drain</th><th>ready after</th></tr>\n");
        for (JsonNode report : reports) {
            JsonNode latency = report.path("latency_ms");
            long ok = report.path("status").path("200").asLong();
            table.append("<tr><td>").append(escape(report.path("label").asString(""))).append("</td>")
                    .append(cell(report.path("throughput_rps").asDouble()))
                    .append(cell(latency.path("p50").asDouble())).append(cell(latency.path("p90").asDouble()))
                    .append(cell(latency.path("p99").asDouble())).append(cell(latency.path("p99.9").asDouble()))
                    .append(cell(latency.path("max").asDouble()))
                    .append("<td>").append(report.path("requests").asLong()).append("</td>")
                    .append("<td>").append(report.path("requests").asLong() - ok).append("</td>")
                    .append("<td").append(report.path("unexpected_5xx").asLong() > 0 ? " class=bad>" : ">")
                    .append(report.path("unexpected_5xx").asLong()).append("</td>")
                    .append("<td>").append(report.path("pool_after_drain").path("devices").isEmpty() ? "n/a (no pool listed)"
                            : LoadDriver.allocatedBytes(report.path("pool_after_drain")) + " B").append("</td>")
                    .append("<td>").append(report.path("ready_after").asInt()).append("</td></tr>\n");
        }
        return table.append("</table>\n").toString();
    }

    private static String poolTable(JsonNode report) {
        StringBuilder table = new StringBuilder("<table><tr><th>device</th><th>when</th><th>mode</th><th>reserved</th>"
                + "<th>allocated</th><th>cached</th><th>peak reserved</th><th>peak allocated</th><th>fragmentation</th>"
                + "<th>chunks</th><th>counters</th></tr>\n");
        boolean any = false;
        for (String when : List.of("pool_before", "pool_after", "pool_after_drain")) {
            JsonNode summary = report.path(when);
            if (summary.has("error")) {
                table.append("<tr><td colspan=11>").append(when).append(": ")
                        .append(escape(summary.path("error").asString(""))).append("</td></tr>\n");
                continue;
            }
            for (Map.Entry<String, JsonNode> entry : summary.path("devices").properties()) {
                any = true;
                JsonNode d = entry.getValue();
                table.append("<tr><td>").append(escape(entry.getKey())).append("</td><td>").append(when)
                        .append("</td><td>").append(escape(d.path("mode").asString(""))).append("</td>")
                        .append(bytes(d, "reservedBytes")).append(bytes(d, "allocatedBytes")).append(bytes(d, "cachedBytes"))
                        .append(bytes(d, "peakReservedBytes")).append(bytes(d, "peakAllocatedBytes"))
                        .append(cell(d.path("fragmentation").asDouble())).append("<td>").append(d.path("chunkCount").asLong())
                        .append("</td><td style='text-align:left'>").append(escape(d.path("counters").toString()))
                        .append("</td></tr>\n");
            }
        }
        if (!any) {
            table.append("<tr><td colspan=11>the endpoint listed no pool (modes DIRECT and CUDA_ASYNC have none)</td></tr>\n");
        }
        return table.append("</table>\n").toString();
    }

    private static String bytes(JsonNode device, String field) {
        return String.format(Locale.ROOT, "<td>%.1f MiB</td>", device.path(field).asLong() / (1024.0 * 1024.0));
    }

    private static String cell(double value) {
        return Double.isNaN(value) ? "<td>-</td>" : String.format(Locale.ROOT, "<td>%.2f</td>", value);
    }

    record Series(String name, double[] values) {
    }

    private static Series series(String name, JsonNode timeline, String field) {
        double[] values = new double[timeline.size()];
        for (int i = 0; i < values.length; i++) {
            values[i] = timeline.get(i).path(field).asDouble(Double.NaN);
        }
        return new Series(name, values);
    }

    /** A line chart of values per second; {@code dashSecond} draws the second series dashed. */
    static String chart(List<Series> series, String unit, boolean dashSecond) {
        int width = 760;
        int height = 240;
        int left = 56;
        int bottom = 28;
        int top = 12;
        int right = 150;
        int points = 1;
        double max = 0;
        for (Series s : series) {
            points = Math.max(points, s.values().length);
            for (double v : s.values()) {
                if (!Double.isNaN(v)) {
                    max = Math.max(max, v);
                }
            }
        }
        max = max <= 0 ? 1 : niceCeiling(max);
        double plotW = width - left - right;
        double plotH = height - top - bottom;
        StringBuilder svg = new StringBuilder(String.format(Locale.ROOT,
                "<svg xmlns='http://www.w3.org/2000/svg' width='%d' height='%d'>%n", width, height));
        for (int g = 0; g <= 4; g++) {
            double y = top + plotH - g * plotH / 4;
            svg.append(String.format(Locale.ROOT, "<line x1='%d' y1='%.1f' x2='%.1f' y2='%.1f' stroke='#ddd'/>"
                            + "<text x='%d' y='%.1f' text-anchor='end'>%s</text>%n", left, y, left + plotW, y, left - 4,
                    y + 4, trim(max * g / 4)));
        }
        svg.append(String.format(Locale.ROOT, "<text x='%d' y='%d'>%s</text>%n", 4, top + 4, unit));
        int step = Math.max(1, points / 10);
        for (int t = 0; t < points; t += step) {
            double x = left + (points == 1 ? 0 : t * plotW / (points - 1));
            svg.append(String.format(Locale.ROOT, "<text x='%.1f' y='%d' text-anchor='middle'>%ds</text>%n", x,
                    height - 8, t));
        }
        for (int i = 0; i < series.size(); i++) {
            Series s = series.get(i);
            StringBuilder path = new StringBuilder();
            for (int t = 0; t < s.values().length; t++) {
                double v = s.values()[t];
                if (Double.isNaN(v)) {
                    continue;
                }
                double x = left + (points == 1 ? 0 : t * plotW / (points - 1));
                double y = top + plotH - v / max * plotH;
                path.append(path.isEmpty() ? "M" : "L").append(String.format(Locale.ROOT, "%.1f,%.1f ", x, y));
            }
            String colour = COLOURS[i % COLOURS.length];
            svg.append(String.format(Locale.ROOT, "<path d='%s' fill='none' stroke='%s' stroke-width='1.6'%s/>%n",
                    path, colour, dashSecond && i == 1 ? " stroke-dasharray='4 3'" : ""));
            svg.append(String.format(Locale.ROOT, "<rect x='%.1f' y='%d' width='12' height='3' fill='%s'/>"
                            + "<text x='%.1f' y='%d'>%s</text>%n", left + plotW + 10, top + 8 + i * 16, colour,
                    left + plotW + 26, top + 12 + i * 16, escape(s.name())));
        }
        return svg.append("</svg>\n").toString();
    }

    /** Vertical bars, one per histogram bucket, labelled with every other upper edge. */
    static String bars(JsonNode histogram) {
        JsonNode edges = histogram.path("le_ms");
        JsonNode counts = histogram.path("count");
        int n = counts.size();
        if (n == 0) {
            return "<p>no successful requests</p>\n";
        }
        int width = 760;
        int height = 200;
        int left = 56;
        int bottom = 30;
        int top = 10;
        double max = 1;
        for (JsonNode count : counts) {
            max = Math.max(max, count.asDouble());
        }
        max = niceCeiling(max);
        double plotW = width - left - 20;
        double plotH = height - top - bottom;
        double barW = plotW / n;
        StringBuilder svg = new StringBuilder(String.format(Locale.ROOT,
                "<svg xmlns='http://www.w3.org/2000/svg' width='%d' height='%d'>%n", width, height));
        for (int g = 0; g <= 4; g++) {
            double y = top + plotH - g * plotH / 4;
            svg.append(String.format(Locale.ROOT, "<line x1='%d' y1='%.1f' x2='%.1f' y2='%.1f' stroke='#ddd'/>"
                    + "<text x='%d' y='%.1f' text-anchor='end'>%s</text>%n", left, y, left + plotW, y, left - 4, y + 4,
                    trim(max * g / 4)));
        }
        for (int i = 0; i < n; i++) {
            double h = counts.get(i).asDouble() / max * plotH;
            double x = left + i * barW;
            svg.append(String.format(Locale.ROOT, "<rect x='%.1f' y='%.1f' width='%.1f' height='%.1f' fill='%s'/>%n",
                    x + 1, top + plotH - h, Math.max(1, barW - 2), h, COLOURS[0]));
            if (i % 2 == 0) {
                svg.append(String.format(Locale.ROOT, "<text x='%.1f' y='%d' text-anchor='middle'>%s</text>%n",
                        x + barW, height - 10, trim(edges.get(i).asDouble())));
            }
        }
        return svg.append("</svg>\n").toString();
    }

    private static double niceCeiling(double value) {
        double magnitude = Math.pow(10, Math.floor(Math.log10(value)));
        for (double m : new double[] {1, 2, 2.5, 5, 10}) {
            if (m * magnitude >= value) {
                return m * magnitude;
            }
        }
        return 10 * magnitude;
    }

    private static String trim(double value) {
        return value == Math.rint(value) ? Long.toString((long) value) : String.format(Locale.ROOT, "%.2f", value);
    }

    static String escape(String text) {
        return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("'", "&#39;");
    }
}
