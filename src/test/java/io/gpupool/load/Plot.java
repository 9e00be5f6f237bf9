package io.gpupool.load;

import tools.jackson.databind.JsonNode;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;

/**
 * Renders a load-driver run as one self-contained HTML page: throughput per second, latency p50 and
 * p99 per second, and the latency histogram (log-scaled buckets), as inline SVG without scripts.
 */
final class Plot {

    private static final int WIDTH = 760;
    private static final int HEIGHT = 220;
    private static final int LEFT = 60;
    private static final int BOTTOM = 30;

    private Plot() {
    }

    static String html(JsonNode report, List<LoadDriver.Sample> samples) {
        int seconds = (int) Math.max(1, Math.ceil(report.get("elapsedSeconds").asDouble()));
        double[] throughput = new double[seconds];
        List<List<Long>> perSecond = new ArrayList<>();
        for (int i = 0; i < seconds; i++) {
            perSecond.add(new ArrayList<>());
        }
        List<Long> okLatencies = new ArrayList<>();
        for (LoadDriver.Sample s : samples) {
            int second = (int) Math.min(seconds - 1, s.endMillis() / 1000);
            if (s.status().equals("200")) {
                throughput[second]++;
                perSecond.get(second).add(s.latencyNanos());
                okLatencies.add(s.latencyNanos());
            }
        }
        double[] p50 = new double[seconds];
        double[] p99 = new double[seconds];
        for (int i = 0; i < seconds; i++) {
            long[] sorted = perSecond.get(i).stream().mapToLong(Long::longValue).sorted().toArray();
            p50[i] = LoadDriver.percentile(sorted, 0.5);
            p99[i] = LoadDriver.percentile(sorted, 0.99);
        }
        StringBuilder page = new StringBuilder("<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>gpupool load run</title>"
                + "<style>body{font-family:sans-serif;margin:2em}svg{background:#fafafa;border:1px solid #ddd}"
                + "pre{background:#f4f4f4;padding:1em}</style></head><body>");
        page.append("<h1>Load run: ").append(escape(report.get("config").get("model").asString())).append("</h1>");
        page.append(String.format(Locale.ROOT, "<p>%d requests in %.1f s, %.1f req/s; latency p50 %.2f ms, p99 %.2f ms, "
                        + "p99.9 %.2f ms; by status %s</p>", report.get("requests").asLong(),
                report.get("elapsedSeconds").asDouble(), report.get("throughputPerSecond").asDouble(),
                report.get("latencyMillis").get("p50").asDouble(), report.get("latencyMillis").get("p99").asDouble(),
                report.get("latencyMillis").get("p999").asDouble(), escape(report.get("byStatus").toString())));
        page.append("<h2>Throughput (successful requests per second)</h2>");
        page.append(lines(new double[][]{throughput}, new String[]{"#1f77b4"}, new String[]{"req/s"}, "s"));
        page.append("<h2>Latency per second (ms)</h2>");
        page.append(lines(new double[][]{p50, p99}, new String[]{"#2ca02c", "#d62728"}, new String[]{"p50", "p99"}, "s"));
        page.append("<h2>Latency histogram</h2>");
        page.append(histogram(okLatencies.stream().mapToLong(Long::longValue).toArray()));
        page.append("<h2>Configuration</h2><pre>").append(escape(report.get("config").toPrettyString())).append("</pre>");
        return page.append("</body></html>\n").toString();
    }

    private static String lines(double[][] series, String[] colors, String[] labels, String xUnit) {
        int n = series[0].length;
        double max = 0;
        for (double[] s : series) {
            max = Math.max(max, Arrays.stream(s).max().orElse(0));
        }
        max = max <= 0 ? 1 : max * 1.1;
        StringBuilder svg = svgStart();
        axes(svg, max, n, xUnit);
        for (int k = 0; k < series.length; k++) {
            StringBuilder points = new StringBuilder();
            for (int i = 0; i < n; i++) {
                points.append(String.format(Locale.ROOT, "%.1f,%.1f ", x(i + 0.5, n), y(series[k][i], max)));
            }
            svg.append("<polyline fill=\"none\" stroke-width=\"2\" stroke=\"").append(colors[k]).append("\" points=\"")
                    .append(points).append("\"/>");
            svg.append(String.format(Locale.ROOT, "<text x=\"%d\" y=\"%d\" fill=\"%s\" font-size=\"12\">%s</text>",
                    WIDTH - 80, 16 + 14 * k, colors[k], labels[k]));
        }
        return svg.append("</svg>").toString();
    }

    private static String histogram(long[] nanos) {
        // buckets: 2^(i/2) microseconds, i.e. two buckets per octave
        int buckets = 48;
        double[] counts = new double[buckets];
        for (long v : nanos) {
            double micros = Math.max(1, v / 1000.0);
            int b = (int) Math.min(buckets - 1, Math.floor(2 * Math.log(micros) / Math.log(2)));
            counts[b]++;
        }
        int first = 0;
        int last = buckets - 1;
        while (first < last && counts[first] == 0) {
            first++;
        }
        while (last > first && counts[last] == 0) {
            last--;
        }
        int n = last - first + 1;
        double max = Math.max(1, Arrays.stream(counts).max().orElse(1)) * 1.1;
        StringBuilder svg = svgStart();
        axes(svg, max, 0, "");
        double barWidth = (WIDTH - LEFT - 10) / (double) n;
        for (int i = 0; i < n; i++) {
            double top = y(counts[first + i], max);
            svg.append(String.format(Locale.ROOT, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"#9467bd\"/>",
                    LEFT + i * barWidth + 1, top, Math.max(1, barWidth - 2), HEIGHT - BOTTOM - top));
            if (i % 2 == 0) {
                double lowMicros = Math.pow(2, (first + i) / 2.0);
                svg.append(String.format(Locale.ROOT, "<text x=\"%.1f\" y=\"%d\" font-size=\"10\">%s</text>",
                        LEFT + i * barWidth, HEIGHT - 10, lowMicros >= 1000 ? String.format(Locale.ROOT, "%.1fms",
                                lowMicros / 1000) : String.format(Locale.ROOT, "%.0fus", lowMicros)));
            }
        }
        return svg.append("</svg>").toString();
    }

    private static StringBuilder svgStart() {
        return new StringBuilder(String.format(Locale.ROOT,
                "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\">", WIDTH, HEIGHT));
    }

    private static void axes(StringBuilder svg, double max, int n, String xUnit) {
        svg.append(String.format(Locale.ROOT, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#333\"/>",
                LEFT, HEIGHT - BOTTOM, WIDTH - 10, HEIGHT - BOTTOM));
        svg.append(String.format(Locale.ROOT, "<line x1=\"%d\" y1=\"10\" x2=\"%d\" y2=\"%d\" stroke=\"#333\"/>",
                LEFT, LEFT, HEIGHT - BOTTOM));
        for (int t = 0; t <= 4; t++) {
            double value = max * t / 4;
            svg.append(String.format(Locale.ROOT, "<text x=\"4\" y=\"%.1f\" font-size=\"10\">%s</text>", y(value, max) + 3,
                    value >= 100 ? String.format(Locale.ROOT, "%.0f", value) : String.format(Locale.ROOT, "%.2f", value)));
        }
        if (n > 0) {
            int step = Math.max(1, n / 10);
            for (int i = 0; i < n; i += step) {
                svg.append(String.format(Locale.ROOT, "<text x=\"%.1f\" y=\"%d\" font-size=\"10\">%d%s</text>",
                        x(i, n), HEIGHT - 10, i, xUnit));
            }
        }
    }

    private static double x(double i, int n) {
        return LEFT + (WIDTH - LEFT - 10) * i / Math.max(1, n);
    }

    private static double y(double value, double max) {
        return HEIGHT - BOTTOM - (HEIGHT - BOTTOM - 10) * value / max;
    }

    private static String escape(String text) {
        return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;");
    }
}
