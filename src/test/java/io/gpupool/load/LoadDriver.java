package io.gpupool.load;

import tools.jackson.databind.JsonNode;
import tools.jackson.databind.json.JsonMapper;
import tools.jackson.databind.node.ArrayNode;
import tools.jackson.databind.node.ObjectNode;

import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.net.http.HttpTimeoutException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Load driver for a gpupool (or any KServe v2) server on loopback: variable-size infer requests at a
 * fixed concurrency (closed loop) or a fixed rate (open loop), bounded in time and count.
 *
 * <pre>
 *   java -cp target/test-classes:target/classes:$(cat target/cp.txt) io.gpupool.load.LoadDriver \
 *       --url http://127.0.0.1:8080 --model tiny-bert --concurrency 8 --duration 30s \
 *       --out target/load.json --html target/load.html
 * </pre>
 * (or {@code tools/loaddriver.sh ...}, which builds the classpath first).
 *
 * <h2>Requests</h2>
 * The driver reads the model's metadata ({@code GET /v2/models/{model}}) and fills every input:
 * a dimension of -1 in first place is the batch (uniform in 1..{@code --batch-max}), a -1 in second
 * place the sequence length (lognormal with median {@code --seq-median} and log-σ
 * {@code --seq-sigma}, clamped to [{@code --seq-min}, {@code --seq-max}]); fixed dimensions are
 * kept. Integer inputs get token ids in [1, {@code --vocab}) ({@code 1} for names containing
 * "mask", {@code 0} for names containing "type"); floating-point inputs get standard normal values.
 * Payloads are generated before the run starts ({@code --distinct} of them, cycled), so the driver's
 * own cost stays out of the latency.
 *
 * <h2>Output</h2>
 * A progress line per second on stderr; at the end throughput, latency p50/p90/p99/p99.9, errors by
 * status, and the pool metrics ({@code GET {actuator}/actuator/gpupool}) before and after, printed and
 * written as JSON ({@code --out}); {@code --html} adds a self-contained page with throughput and
 * latency over time and the latency histogram (inline SVG, no scripts).
 */
public final class LoadDriver {

    /** One finished request: when it ended (ms since start), how long it took, its outcome. */
    record Sample(long endMillis, long latencyNanos, String status, long tokens) {
    }

    record Options(URI url, String actuator, String model, int concurrency, double rate, Duration duration,
                   long requests, int batchMax, int seqMin, int seqMax, double seqMedian, double seqSigma, int vocab,
                   int distinct, long seed, Duration timeout, Path out, Path html) {
    }

    private final Options options;
    private final HttpClient client;
    private final JsonMapper json = JsonMapper.builder().build();
    private final ConcurrentLinkedQueue<Sample> samples = new ConcurrentLinkedQueue<>();
    private final AtomicLong sent = new AtomicLong();
    private final AtomicLong completed = new AtomicLong();
    private final AtomicLong failed = new AtomicLong();
    private long startNanos;

    LoadDriver(Options options) {
        this.options = options;
        this.client = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1)
                .connectTimeout(Duration.ofSeconds(5)).build();
    }

    public static void main(String[] args) throws Exception {
        Options options = parse(args);
        LoadDriver driver = new LoadDriver(options);
        ObjectNode report = driver.run();
        String text = JsonMapper.builder().build().writerWithDefaultPrettyPrinter().writeValueAsString(report);
        if (options.out() != null) {
            Files.createDirectories(options.out().toAbsolutePath().getParent());
            Files.writeString(options.out(), text);
            System.err.println("JSON: " + options.out());
        }
        if (options.html() != null) {
            Files.createDirectories(options.html().toAbsolutePath().getParent());
            Files.writeString(options.html(), Plot.html(report, driver.sortedSamples()));
            System.err.println("plot: " + options.html());
        }
    }

    ObjectNode run() throws Exception {
        String base = options.url().toString().replaceAll("/$", "");
        JsonNode metadata = getJson(base + "/v2/models/" + options.model());
        if (metadata == null) {
            throw new IllegalStateException("GET " + base + "/v2/models/" + options.model()
                    + " failed: is the server running and the model loaded?");
        }
        List<byte[]> payloads = new ArrayList<>();
        List<Long> payloadTokens = new ArrayList<>();
        SplittableRandom random = new SplittableRandom(options.seed());
        for (int i = 0; i < options.distinct(); i++) {
            long[] tokens = new long[1];
            payloads.add(payload(metadata, random, tokens));
            payloadTokens.add(tokens[0]);
        }
        JsonNode poolBefore = options.actuator() == null ? null : getJson(options.actuator() + "/actuator/gpupool");
        URI infer = URI.create(base + "/v2/models/" + options.model() + "/infer");

        startNanos = System.nanoTime();
        long deadline = startNanos + options.duration().toNanos();
        Thread progress = Thread.ofPlatform().daemon().start(() -> progress(deadline));
        try (ExecutorService executor = Executors.newVirtualThreadPerTaskExecutor()) {
            if (options.rate() > 0) {
                openLoop(executor, infer, payloads, payloadTokens, deadline);
            } else {
                for (int w = 0; w < options.concurrency(); w++) {
                    executor.submit(() -> {
                        while (System.nanoTime() < deadline) {
                            long n = sent.incrementAndGet();
                            if (n > options.requests()) {
                                return;
                            }
                            int index = (int) (n % payloads.size());
                            send(infer, payloads.get(index), payloadTokens.get(index));
                        }
                    });
                }
            }
            executor.shutdown();
            executor.awaitTermination(options.duration().toSeconds() + options.timeout().toSeconds() + 30,
                    TimeUnit.SECONDS);
        }
        long elapsedNanos = System.nanoTime() - startNanos;
        progress.interrupt();
        JsonNode poolAfter = options.actuator() == null ? null : getJson(options.actuator() + "/actuator/gpupool");
        return report(elapsedNanos, poolBefore, poolAfter);
    }

    /** Issues requests at a fixed rate whatever the server's latency (bounded by 4096 in flight). */
    private void openLoop(ExecutorService executor, URI infer, List<byte[]> payloads, List<Long> tokens,
                          long deadline) throws InterruptedException {
        long intervalNanos = (long) (1e9 / options.rate());
        Semaphore inFlight = new Semaphore(4096);
        long next = System.nanoTime();
        for (long n = 1; n <= options.requests() && next < deadline; n++) {
            long wait = next - System.nanoTime();
            if (wait > 0) {
                TimeUnit.NANOSECONDS.sleep(wait);
            }
            if (!inFlight.tryAcquire()) {
                samples.add(new Sample(millisSinceStart(), 0, "driver-overload", 0));
                failed.incrementAndGet();
            } else {
                sent.incrementAndGet();
                int index = (int) (n % payloads.size());
                executor.submit(() -> {
                    try {
                        send(infer, payloads.get(index), tokens.get(index));
                    } finally {
                        inFlight.release();
                    }
                });
            }
            next += intervalNanos;
        }
    }

    private void send(URI infer, byte[] body, long tokens) {
        HttpRequest request = HttpRequest.newBuilder(infer).timeout(options.timeout())
                .header("Content-Type", "application/json")
                .POST(HttpRequest.BodyPublishers.ofByteArray(body)).build();
        long start = System.nanoTime();
        String status;
        try {
            HttpResponse<byte[]> response = client.send(request, HttpResponse.BodyHandlers.ofByteArray());
            status = Integer.toString(response.statusCode());
        } catch (HttpTimeoutException e) {
            status = "timeout";
        } catch (IOException e) {
            status = "io-error";
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return;
        }
        long latency = System.nanoTime() - start;
        samples.add(new Sample(millisSinceStart(), latency, status, tokens));
        if (status.equals("200")) {
            completed.incrementAndGet();
        } else {
            failed.incrementAndGet();
        }
    }

    private long millisSinceStart() {
        return (System.nanoTime() - startNanos) / 1_000_000;
    }

    private void progress(long deadline) {
        long lastCompleted = 0;
        try {
            while (true) {
                Thread.sleep(1000);
                long done = completed.get();
                long seconds = (System.nanoTime() - startNanos) / 1_000_000_000L;
                long left = Math.max(0, (deadline - System.nanoTime()) / 1_000_000_000L);
                System.err.printf(Locale.ROOT, "\r[%3ds, %3ds left] sent %d  ok %d  errors %d  %d req/s   ",
                        seconds, left, sent.get(), done, failed.get(), done - lastCompleted);
                lastCompleted = done;
            }
        } catch (InterruptedException e) {
            System.err.println();
        }
    }

    /** One request body for the model's inputs; {@code tokensOut[0]} receives batch x sequence. */
    byte[] payload(JsonNode metadata, SplittableRandom random, long[] tokensOut) {
        int batch = 1 + random.nextInt(options.batchMax());
        double gaussian = Math.sqrt(-2 * Math.log(1 - random.nextDouble())) * Math.cos(2 * Math.PI * random.nextDouble());
        long seq = Math.round(options.seqMedian() * Math.exp(options.seqSigma() * gaussian));
        seq = Math.max(options.seqMin(), Math.min(options.seqMax(), seq));
        ObjectNode body = json.createObjectNode();
        ArrayNode inputs = body.putArray("inputs");
        long tokens = batch;
        for (JsonNode input : metadata.get("inputs")) {
            String name = input.get("name").asString();
            String datatype = input.get("datatype").asString();
            JsonNode shape = input.get("shape");
            long[] dims = new long[shape.size()];
            long count = 1;
            for (int d = 0; d < dims.length; d++) {
                long dim = shape.get(d).asLong();
                dims[d] = dim >= 0 ? dim : d == 0 ? batch : d == 1 ? seq : 1;
                count *= dims[d];
            }
            if (dims.length > 1 && shape.get(1).asLong() < 0) {
                tokens = batch * seq;
            }
            ObjectNode tensor = inputs.addObject();
            tensor.put("name", name);
            ArrayNode shapeNode = tensor.putArray("shape");
            for (long dim : dims) {
                shapeNode.add(dim);
            }
            tensor.put("datatype", datatype);
            ArrayNode data = tensor.putArray("data");
            boolean floating = datatype.startsWith("FP") || datatype.startsWith("BF");
            String lower = name.toLowerCase(Locale.ROOT);
            for (long i = 0; i < count; i++) {
                if (floating) {
                    data.add(Math.round(random.nextGaussian() * 1000) / 1000.0);
                } else if (lower.contains("mask")) {
                    data.add(1);
                } else if (lower.contains("type")) {
                    data.add(0);
                } else {
                    data.add(1 + random.nextInt(Math.max(1, options.vocab() - 1)));
                }
            }
        }
        tokensOut[0] = tokens;
        return json.writeValueAsBytes(body);
    }

    private JsonNode getJson(String url) {
        try {
            HttpResponse<String> response = client.send(HttpRequest.newBuilder(URI.create(url))
                    .timeout(Duration.ofSeconds(10)).GET().build(), HttpResponse.BodyHandlers.ofString());
            if (response.statusCode() != 200) {
                System.err.println("GET " + url + " -> " + response.statusCode());
                return null;
            }
            return json.readTree(response.body());
        } catch (IOException e) {
            System.err.println("GET " + url + " failed: " + e);
            return null;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return null;
        }
    }

    List<Sample> sortedSamples() {
        List<Sample> list = new ArrayList<>(samples);
        list.sort((a, b) -> Long.compare(a.endMillis(), b.endMillis()));
        return list;
    }

    private ObjectNode report(long elapsedNanos, JsonNode poolBefore, JsonNode poolAfter) {
        List<Sample> all = sortedSamples();
        long[] ok = all.stream().filter(s -> s.status().equals("200")).mapToLong(Sample::latencyNanos).sorted().toArray();
        long okTokens = all.stream().filter(s -> s.status().equals("200")).mapToLong(Sample::tokens).sum();
        Map<String, Long> byStatus = new TreeMap<>();
        for (Sample s : all) {
            byStatus.merge(s.status(), 1L, Long::sum);
        }
        double seconds = elapsedNanos / 1e9;
        ObjectNode report = json.createObjectNode();
        ObjectNode config = report.putObject("config");
        config.put("url", options.url().toString());
        config.put("model", options.model());
        config.put("concurrency", options.rate() > 0 ? 0 : options.concurrency());
        config.put("rate", options.rate());
        config.put("durationSeconds", options.duration().toMillis() / 1000.0);
        config.put("maxRequests", options.requests());
        config.put("batchMax", options.batchMax());
        config.put("seqMin", options.seqMin());
        config.put("seqMax", options.seqMax());
        config.put("seqMedian", options.seqMedian());
        config.put("seqSigma", options.seqSigma());
        config.put("seed", options.seed());
        report.put("elapsedSeconds", seconds);
        report.put("requests", all.size());
        report.put("succeeded", ok.length);
        report.put("throughputPerSecond", ok.length / seconds);
        report.put("tokensPerSecond", okTokens / seconds);
        ObjectNode latency = report.putObject("latencyMillis");
        latency.put("p50", percentile(ok, 0.50));
        latency.put("p90", percentile(ok, 0.90));
        latency.put("p99", percentile(ok, 0.99));
        latency.put("p999", percentile(ok, 0.999));
        latency.put("max", ok.length == 0 ? 0 : ok[ok.length - 1] / 1e6);
        latency.put("mean", ok.length == 0 ? 0 : Arrays.stream(ok).average().orElse(0) / 1e6);
        ObjectNode statuses = report.putObject("byStatus");
        byStatus.forEach(statuses::put);
        if (poolBefore != null) {
            report.set("poolBefore", poolBefore);
        }
        if (poolAfter != null) {
            report.set("poolAfter", poolAfter);
        }
        System.out.printf(Locale.ROOT, "%d requests in %.1f s: %.1f req/s, %.0f tokens/s; latency ms p50 %.2f p90 %.2f "
                        + "p99 %.2f p99.9 %.2f max %.2f; by status %s%n", all.size(), seconds, ok.length / seconds,
                okTokens / seconds, percentile(ok, 0.5), percentile(ok, 0.9), percentile(ok, 0.99),
                percentile(ok, 0.999), ok.length == 0 ? 0 : ok[ok.length - 1] / 1e6, byStatus);
        return report;
    }

    /** Nearest-rank percentile in milliseconds of sorted nanosecond values; 0 when empty. */
    static double percentile(long[] sortedNanos, double q) {
        if (sortedNanos.length == 0) {
            return 0;
        }
        int rank = (int) Math.ceil(q * sortedNanos.length);
        return sortedNanos[Math.max(0, Math.min(sortedNanos.length - 1, rank - 1))] / 1e6;
    }

    static Options parse(String[] args) {
        URI url = URI.create("http://127.0.0.1:8080");
        String actuator = "http://127.0.0.1:8081";
        String model = "tiny-bert";
        int concurrency = 8;
        double rate = 0;
        Duration duration = Duration.ofSeconds(30);
        long requests = Long.MAX_VALUE;
        int batchMax = 8;
        int seqMin = 4;
        int seqMax = 64;
        double seqMedian = 24;
        double seqSigma = 0.7;
        int vocab = 100;
        int distinct = 256;
        long seed = 42;
        Duration timeout = Duration.ofSeconds(60);
        Path out = Path.of("target/load.json");
        Path html = Path.of("target/load.html");
        for (int i = 0; i < args.length; i++) {
            String option = args[i];
            String value = i + 1 < args.length ? args[i + 1] : null;
            if (value == null) {
                throw new IllegalArgumentException(option + " needs a value");
            }
            i++;
            switch (option) {
                case "--url" -> url = URI.create(value);
                case "--actuator" -> actuator = value.equals("none") ? null : value;
                case "--model" -> model = value;
                case "--concurrency" -> concurrency = positive(option, Integer.parseInt(value));
                case "--rate" -> rate = Double.parseDouble(value);
                case "--duration" -> duration = duration(option, value);
                case "--requests" -> requests = positive(option, Long.parseLong(value));
                case "--batch-max" -> batchMax = positive(option, Integer.parseInt(value));
                case "--seq-min" -> seqMin = positive(option, Integer.parseInt(value));
                case "--seq-max" -> seqMax = positive(option, Integer.parseInt(value));
                case "--seq-median" -> seqMedian = Double.parseDouble(value);
                case "--seq-sigma" -> seqSigma = Double.parseDouble(value);
                case "--vocab" -> vocab = positive(option, Integer.parseInt(value));
                case "--distinct" -> distinct = positive(option, Integer.parseInt(value));
                case "--seed" -> seed = Long.parseLong(value);
                case "--timeout" -> timeout = duration(option, value);
                case "--out" -> out = value.equals("none") ? null : Path.of(value);
                case "--html" -> html = value.equals("none") ? null : Path.of(value);
                default -> throw new IllegalArgumentException("unknown option " + option
                        + "; see the class comment of " + LoadDriver.class.getName());
            }
        }
        if (seqMax < seqMin) {
            throw new IllegalArgumentException("--seq-max (" + seqMax + ") must be >= --seq-min (" + seqMin + ")");
        }
        if (rate < 0) {
            throw new IllegalArgumentException("--rate must be >= 0 (0 = closed loop at --concurrency), got " + rate);
        }
        return new Options(url, actuator, model, concurrency, rate, duration, requests, batchMax, seqMin, seqMax,
                seqMedian, seqSigma, vocab, distinct, seed, timeout, out, html);
    }

    private static <T extends Number> T positive(String option, T value) {
        if (value.doubleValue() <= 0) {
            throw new IllegalArgumentException(option + " must be positive, got " + value);
        }
        return value;
    }

    /** "30s", "2m", "500ms" or plain seconds. */
    static Duration duration(String option, String value) {
        String v = value.strip().toLowerCase(Locale.ROOT);
        try {
            if (v.endsWith("ms")) {
                return Duration.ofMillis(Long.parseLong(v.substring(0, v.length() - 2)));
            }
            if (v.endsWith("s")) {
                return Duration.ofMillis((long) (Double.parseDouble(v.substring(0, v.length() - 1)) * 1000));
            }
            if (v.endsWith("m")) {
                return Duration.ofMillis((long) (Double.parseDouble(v.substring(0, v.length() - 1)) * 60_000));
            }
            return Duration.ofMillis((long) (Double.parseDouble(v) * 1000));
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException(option + " must be a duration like 30s, 2m or 500ms, got '" + value + "'");
        }
    }
}
