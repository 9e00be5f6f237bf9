package io.gpupool.lab;

import tools.jackson.databind.JsonNode;
import tools.jackson.databind.json.JsonMapper;
import tools.jackson.databind.node.ArrayNode;
import tools.jackson.databind.node.ObjectNode;

import java.io.IOException;
import java.io.PrintStream;
import java.net.InetAddress;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.net.http.HttpTimeoutException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;
import java.util.concurrent.locks.LockSupport;

/**
 * Load driver for a gpupool server on this machine: sends variable-size KServe v2 infer requests at a
 * fixed concurrency (closed loop) or a fixed rate (open loop), bounded in time and count, and reports
 * throughput, latency percentiles, answers by status and the pool's state before and after, as JSON
 * and as a self-contained HTML page with SVG charts. See {@link #USAGE} and docs/benchmarks.md.
 *
 * <h2>A run</h2>
 * <ol>
 *   <li>Refuse any target that is not a loopback address (this is a benchmark, not a traffic generator).</li>
 *   <li>Read readiness ({@code /v2/health/ready}) and the pool ({@code /actuator/gpupool} on the
 *       management port).</li>
 *   <li>Generate {@code --variants} bodies per model up front ({@link Workload}).</li>
 *   <li>Warm-up for {@code --warmup}, recorded apart and discarded.</li>
 *   <li>Measure for {@code --duration} or {@code --requests}, whichever ends first, printing a progress
 *       line every second. A share {@code --cancel} of requests is abandoned after a random delay up to
 *       {@code --cancel-delay} (the client hangs up); {@code --malformed} sends the malformed corpus.</li>
 *   <li>Read the pool again at once, then wait up to {@code --drain} for its allocated bytes to return
 *       to zero (cancelled work may still be finishing), read it a last time, and read readiness.</li>
 * </ol>
 *
 * <h2>Latency</h2>
 * Closed loop: from send to the last byte of the answer. Open loop: from the moment the request was
 * <em>due</em>, so a server that falls behind is charged for the queueing it causes (no coordinated
 * omission); a request that finds {@code --max-outstanding} requests open is counted as skipped.
 * Percentiles are exact (nearest rank) over the 200 answers.
 */
public final class LoadDriver {

    static final String USAGE = """
            usage: LoadDriver [options]
              --url URL              inference API (default http://127.0.0.1:8080); loopback only
              --actuator URL         management port (default http://127.0.0.1:8081); "none" skips pool reads
              --mix bert=W,mlp=W     request mix by weight (default bert=1)
              --bert-model NAME      (default tiny-bert)       --mlp-model NAME (default iris-mlp)
              --bert-output NAME     the one output BERT requests ask for (default pooler_output)
              --model NAME           instead of the mix: any model, inputs filled from its metadata
              --batch-max N          BERT batch uniform in [--batch-min, N] (default 8, tiny-bert's maximum; 32 for bert-base)
              --batch-min N          ... from N (default 1)
              --seq-median X         BERT sequence length: log-normal median (default 24)
              --seq-sigma X          ... and shape (default 0.6)
              --seq-min N, --seq-max N  ... clipped to [N, N] (default 1 and 64, tiny-bert's maximum; 512 for bert-base)
              --vocab N              token ids uniform in [1, N) (default 100, tiny-bert's vocabulary)
              --mlp-batch-max N      MLP batch uniform in [1, N] (default 32)
              --binary X             share of BERT requests using the binary data extension (default 0)
              --malformed X          share of requests drawn from the malformed corpus (default 0)
              --cancel X             share of requests abandoned mid-flight (default 0)
              --cancel-delay D       abandon after a uniform delay in [0, D] (default 20ms)
              --concurrency N        closed loop with N clients (default 8)
              --rate R               open loop at R requests/s (overrides --concurrency)
              --max-outstanding N    open loop: most requests in flight before skipping (default 1024)
              --duration D           measured time (default 20s)
              --requests N           stop after N measured requests (default: only the duration bounds)
              --warmup D             warm-up, not measured (default 3s)
              --timeout D            client timeout per request (default 60s)
              --drain D              wait this long for the pool's allocated bytes to return to 0 (default 30s)
              --distinct N           distinct bodies generated per model (default 256)
              --seed N               (default 1)
              --label TEXT           name of the run in the report (default: the mix)
              --out FILE.json        JSON report (default target/load/load.json)
              --html FILE.html       HTML page (default: next to the JSON, same name)
              --quiet                no progress line
              --check                exit 1 if a 5xx other than 503/504/507 was seen, the pool could not be
                                     read or did not drain to 0 allocated bytes, or the server was not
                                     ready afterwards (needs --actuator)
            Durations: 500ms, 20s, 2m (plain numbers are seconds). The JSON and HTML paths are printed at the end.
            """;

    private static final JsonMapper JSON = JsonMapper.builder().build();
    private static final int TIMEOUT = -3;
    /** LOAD_TRACE=1 prints every request's case and status (debugging the server with the corpus). */
    private static final boolean TRACE = "1".equals(System.getenv("LOAD_TRACE"));

    /** The parsed command line. */
    record Options(URI url, URI management, Workload.Mix mix, String model, int concurrency, double rate,
                   int maxOutstanding, Duration duration, long maxRequests, Duration warmup, double cancelShare,
                   Duration cancelDelay, Duration timeout, Duration drain, int variants, long seed, String label,
                   Path jsonOut, Path html, boolean progress, boolean check, boolean allocationTrace,
                   Duration trimEvery) {

        Path htmlOut() {
            if (html != null) {
                return html;
            }
            String name = jsonOut.getFileName().toString();
            String base = name.endsWith(".json") ? name.substring(0, name.length() - 5) : name;
            return jsonOut.resolveSibling(base + ".html");
        }
    }

    private final Options options;
    private final PrintStream log;
    static {
        // A POST sent on a pooled keep-alive connection that the server closed at that moment (after a
        // hang-up or a malformed request) fails before any response byte; let the JDK client resend it,
        // as it does for GET, instead of counting an unanswered request. Effective when this class is
        // the first HttpClient user of the JVM (the tools); the test build sets it on the command line.
        if (System.getProperty("jdk.httpclient.enableAllMethodRetry") == null) {
            System.setProperty("jdk.httpclient.enableAllMethodRetry", "true");
        }
    }

    private final HttpClient http;
    /**
     * Sends only the requests this driver will hang up on: cancelling an exchange closes its
     * connection, and in a shared pool that close can race with the next request handed the same
     * connection, which then waits for its timeout although the server never saw it whole.
     */
    private final HttpClient hangingUpHttp;

    LoadDriver(Options options, PrintStream log) {
        this.options = options;
        this.log = log;
        this.http = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1)
                .connectTimeout(Duration.ofSeconds(5)).build();
        this.hangingUpHttp = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1)
                .connectTimeout(Duration.ofSeconds(5)).build();
        this.retryHttp = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1)
                .connectTimeout(Duration.ofSeconds(5)).build();
    }

    /**
     * Resends, once, a request that got no answer within the timeout, on a connection of its own, to tell
     * a connection the server stopped reading from a server that stalled. Reactor Netty 1.3.6 can stop
     * reading a kept-alive connection after an exchange (reactor/reactor-netty#4361); the server resumes the
     * read itself ({@code config.KeepAliveReadResume}), so a request answered only on the second try, counted
     * in {@code answered_after_retry}, means that defence failed; one unanswered twice is a stall of the
     * server and stays unanswered.
     */
    private final HttpClient retryHttp;
    private final Map<String, LongAdder> answeredAfterRetry = new ConcurrentHashMap<>();

    public static void main(String[] args) throws Exception {
        Options options;
        try {
            options = parse(args);
        } catch (IllegalArgumentException e) {
            if (!e.getMessage().equals("help")) {
                System.err.println("error: " + e.getMessage());
            }
            System.err.print(USAGE);
            System.exit(2);
            return;
        }
        Result result = new LoadDriver(options, System.err).run();
        result.write(options);
        System.out.println(result.summaryLine());
        System.out.println("JSON: " + options.jsonOut().toAbsolutePath() + "  HTML: " + options.htmlOut().toAbsolutePath());
        if (options.check() && !result.expectationsMet()) {
            System.err.println("[load] CHECK FAILED: " + result.failedExpectations());
            System.exit(1);
        }
    }

    /** The outcome of a run: the JSON report and the facts the checks need. */
    record Result(ObjectNode report, long unexpected5xx, long allocatedAfterDrain, String poolError, int readyAfter,
                  Recorder recorder, double elapsedSeconds) {

        boolean expectationsMet() {
            return failedExpectations().isEmpty();
        }

        List<String> failedExpectations() {
            List<String> failed = new ArrayList<>();
            if (unexpected5xx > 0) {
                failed.add(unexpected5xx + " answers with 5xx other than 503/504/507: " + report.get("unexpected"));
            }
            if (poolError != null) {
                failed.add("the pool could not be read after the run (" + poolError + "), so its draining to 0 "
                        + "allocated bytes was not seen");
            } else if (allocatedAfterDrain != 0) {
                failed.add("pool allocated bytes after drain, less what cached CUDA graphs hold = "
                        + allocatedAfterDrain + " (expected 0): " + heldAfterDrain(report.path("pool_after_drain")));
            }
            if (readyAfter != 200) {
                failed.add("/v2/health/ready answered " + readyAfter + " after the run (expected 200)");
            }
            JsonNode trims = report.path("operator_trims");
            for (String status : trims.propertyNames()) {
                if (!status.equals("200")) {
                    failed.add(trims.get(status).asLong() + " operator trims answered " + status + " (expected 200)");
                }
            }
            return failed;
        }

        String summaryLine() {
            JsonNode latency = report.get("latency_ms");
            return String.format(Locale.ROOT, "[load] %s: %.1f req/s ok, p50 %.2f ms, p99 %.2f ms, p99.9 %.2f ms, "
                            + "statuses %s, pool allocated after drain %d B, ready after %d",
                    report.get("label").asString(), report.get("throughput_rps").asDouble(),
                    latency.get("p50").asDouble(), latency.get("p99").asDouble(), latency.get("p99.9").asDouble(),
                    report.get("status"), allocatedAfterDrain, readyAfter);
        }

        void write(Options options) throws IOException {
            Path json = options.jsonOut().toAbsolutePath();
            Files.createDirectories(json.getParent());
            Files.writeString(json, JSON.writerWithDefaultPrettyPrinter().writeValueAsString(report));
            Files.writeString(options.htmlOut().toAbsolutePath(), LoadReportHtml.render(report));
        }
    }

    Result run() throws InterruptedException {
        requireLoopback(options.url());
        if (options.management() != null) {
            requireLoopback(options.management());
        }
        ObjectNode report = JSON.createObjectNode();
        report.put("tool", "gpupool LoadDriver");
        report.put("label", options.label());
        report.put("started_at", Instant.now().toString());
        report.set("options", optionsJson());
        report.put("ready_before", status(options.url().resolve("/v2/health/ready")));
        report.set("pool_before", poolSummary());

        Workload workload;
        if (options.model() != null) {
            JsonNode metadata = getJson(options.url().resolve("/v2/models/" + options.model()));
            if (metadata == null) {
                throw new IllegalStateException("GET /v2/models/" + options.model() + " failed: is the server running "
                        + "and the model loaded?");
            }
            workload = Workload.fromMetadata(options.mix(), options.model(), metadata, options.variants(), options.seed());
        } else {
            workload = Workload.prepare(options.mix(), options.variants(), options.seed());
        }
        report.put("malformed_cases", workload.malformedCases().size());
        if (!options.warmup().isZero()) {
            log.printf(Locale.ROOT, "[load] warm-up %d ms%n", options.warmup().toMillis());
            drive(workload, new Recorder(1 << 20), options.warmup(), Long.MAX_VALUE, false, options.seed() + 1);
        }
        Recorder recorder = new Recorder((int) Math.min(options.maxRequests(), 4_000_000));
        log.printf(Locale.ROOT, "[load] %s: %s for %d s%s%n", options.label(),
                options.rate() > 0 ? "rate " + options.rate() + "/s" : "concurrency " + options.concurrency(),
                options.duration().toSeconds(), options.maxRequests() < Long.MAX_VALUE ? " or " + options.maxRequests() + " requests" : "");
        List<String> traced = options.allocationTrace() ? startAllocationTraces(report.get("pool_before")) : List.of();
        Map<Integer, LongAdder> trims = new ConcurrentHashMap<>();
        Thread trimmer = options.trimEvery().isZero() ? null : Thread.ofVirtual().name("load-trims").start(() -> trimUntilInterrupted(trims));
        double elapsed;
        try {
            elapsed = drive(workload, recorder, options.duration(), options.maxRequests(), options.progress(),
                    options.seed());
        } finally {
            if (trimmer != null) {
                trimmer.interrupt();
                trimmer.join();
            }
        }
        if (trimmer != null) {
            ObjectNode trimNode = JSON.createObjectNode();
            trims.forEach((status, count) -> trimNode.put(String.valueOf(status), count.sum()));
            report.set("operator_trims", trimNode);
        }
        if (!traced.isEmpty()) {
            report.set("allocation_traces", writeAllocationTraces(traced));
        }

        report.set("pool_after", poolSummary());
        long drainStarted = System.nanoTime();
        long allocated = allocatedBytes(report.get("pool_after"));
        while (allocated > 0 && System.nanoTime() - drainStarted < options.drain().toNanos()) {
            Thread.sleep(200);
            allocated = allocatedBytes(poolSummary());
        }
        JsonNode drained = poolSummary();
        allocated = allocatedBytes(drained);
        report.set("pool_after_drain", drained);
        report.put("drain_ms", (System.nanoTime() - drainStarted) / 1_000_000);
        int readyAfter = status(options.url().resolve("/v2/health/ready"));
        report.put("ready_after", readyAfter);

        long unexpected = summarize(report, recorder, elapsed);
        String poolError = drained.has("error") ? drained.get("error").asString() : null;
        return new Result(report, unexpected, allocated, poolError, readyAfter, recorder, elapsed);
    }

    /** Runs the load until {@code duration} passed or {@code maxRequests} were issued; answers the seconds it took. */
    private double drive(Workload workload, Recorder recorder, Duration duration, long maxRequests, boolean progress,
                         long seed) throws InterruptedException {
        long origin = System.nanoTime();
        long end = origin + duration.toNanos();
        AtomicLong issued = new AtomicLong();
        LongAdder skipped = new LongAdder();
        SplittableRandom master = new SplittableRandom(seed);
        Thread reporter = progress ? Thread.ofPlatform().daemon().name("load-progress")
                .start(() -> progress(recorder, origin, duration, skipped)) : null;
        try (ExecutorService clients = Executors.newVirtualThreadPerTaskExecutor()) {
            if (options.rate() > 0) {
                long intervalNanos = (long) (1e9 / options.rate());
                for (long k = 0; ; k++) {
                    long due = origin + k * intervalNanos;
                    if (due >= end || k >= maxRequests || !recorder.hasRoom()) {
                        break;
                    }
                    long wait = due - System.nanoTime();
                    if (wait > 0) {
                        LockSupport.parkNanos(wait);
                    }
                    if (recorder.inFlight() >= options.maxOutstanding()) {
                        skipped.increment();
                        continue;
                    }
                    SplittableRandom random = master.split();
                    Workload.Request request = workload.next(random);
                    recorder.begin();
                    clients.execute(() -> { exchange(request, random, recorder, origin, due); });
                }
            } else {
                for (int c = 0; c < options.concurrency(); c++) {
                    SplittableRandom random = master.split();
                    clients.execute(() -> {
                        ReconnectBackoff backoff = new ReconnectBackoff();
                        while (System.nanoTime() < end && issued.incrementAndGet() <= maxRequests && recorder.hasRoom()) {
                            Workload.Request request = workload.next(random);
                            recorder.begin();
                            int status = exchange(request, random, recorder, origin, System.nanoTime());
                            backoff.after(status == Recorder.TRANSPORT, end);
                        }
                    });
                }
            }
        } // waits for every client
        double elapsed = (System.nanoTime() - origin) / 1e9;
        if (reporter != null) {
            reporter.interrupt();
            reporter.join();
        }
        skippedTotal = skipped.sum();
        return elapsed;
    }

    /** Open loop: requests not sent in the last drive because --max-outstanding were in flight. */
    private long skippedTotal;

    /**
     * A closed-loop client's pause after a request that got no answer at all (connection refused or
     * reset: the server is gone or restarting): 10 ms, doubling up to 1 s, back to none after an answer.
     * Without it a client retries at once, thousands of times a second, and its outgoing ports churn.
     */
    static final class ReconnectBackoff {
        static final long FIRST_NANOS = 10_000_000L;
        static final long MAX_NANOS = 1_000_000_000L;
        private long nextNanos;

        void after(boolean transportFailure, long deadlineNanos) {
            if (!transportFailure) {
                nextNanos = 0;
                return;
            }
            nextNanos = nextNanos == 0 ? FIRST_NANOS : Math.min(MAX_NANOS, nextNanos * 2);
            long pause = Math.min(nextNanos, deadlineNanos - System.nanoTime());
            if (pause > 0) {
                LockSupport.parkNanos(pause);
            }
        }
    }

    /** One request: send, maybe hang up on purpose, record the outcome and answer it. Never throws. */
    private int exchange(Workload.Request request, SplittableRandom random, Recorder recorder, long origin,
                          long startNanos) {
        int status;
        HttpRequest.Builder builder = HttpRequest.newBuilder(options.url().resolve(request.path()))
                .timeout(options.timeout())
                .header("Content-Type", request.contentType())
                .POST(HttpRequest.BodyPublishers.ofByteArray(request.body()));
        if (request.headerLength() != null) {
            builder.header("Inference-Header-Content-Length", request.headerLength());
        }
        boolean cancel = options.cancelShare() > 0 && random.nextDouble() < options.cancelShare();
        long cancelAfterNanos = cancel ? (long) (random.nextDouble() * options.cancelDelay().toNanos()) : 0;
        CompletableFuture<HttpResponse<byte[]>> answer;
        try {
            answer = (cancel ? hangingUpHttp : http).sendAsync(builder.build(), HttpResponse.BodyHandlers.ofByteArray());
        } catch (RuntimeException e) {
            recorder.record(request, micros(startNanos - origin), micros(System.nanoTime() - startNanos), Recorder.TRANSPORT);
            return Recorder.TRANSPORT;
        }
        try {
            HttpResponse<byte[]> response = cancel
                    ? answer.get(cancelAfterNanos, TimeUnit.NANOSECONDS)
                    : answer.get(options.timeout().toMillis() + 5_000, TimeUnit.MILLISECONDS);
            status = response.statusCode();
            if (request.kind() != Workload.Kind.MALFORMED && status >= 400 && status < 500) {
                String key = request.kind().name().toLowerCase(Locale.ROOT) + " -> " + status;
                refusedWellFormed.computeIfAbsent(key, k -> new LongAdder()).increment();
                firstUnexpectedBody.putIfAbsent(key, new String(response.body(), 0,
                        Math.min(300, response.body().length), StandardCharsets.UTF_8));
            }
            if (Recorder.isUnexpected(status)) {
                firstUnexpectedBody.putIfAbsent(request.caseName() + " -> " + status,
                        new String(response.body(), 0, Math.min(300, response.body().length), StandardCharsets.UTF_8));
            }
        } catch (TimeoutException e) {
            answer.cancel(true); // hang up: HTTP/1.1 closes the connection under the server's feet
            status = cancel ? Recorder.CANCELLED : retryOnce(builder, request);
        } catch (ExecutionException e) {
            status = e.getCause() instanceof HttpTimeoutException ? retryOnce(builder, request) : Recorder.TRANSPORT;
            if (status == Recorder.TRANSPORT) {
                firstTransportError.compareAndSet(null, request.caseName() + ": " + e.getCause());
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            status = Recorder.TRANSPORT;
        }
        if (TRACE) {
            log.printf(Locale.ROOT, "[trace] %s %s -> %d%n", Thread.currentThread(), request.caseName(), status);
        }
        if (status == TIMEOUT || status == Recorder.TRANSPORT) {
            unanswered.computeIfAbsent(request.caseName() + (cancel ? " (to be cancelled)" : ""),
                    k -> new LongAdder()).increment();
        }
        recorder.record(request, micros(startNanos - origin), micros(System.nanoTime() - startNanos), status);
        return status;
    }

    /** The second try of a request that timed out (see {@link #retryHttp}): its status, or TIMEOUT / TRANSPORT. */
    private int retryOnce(HttpRequest.Builder builder, Workload.Request request) {
        try {
            int status = retryHttp.send(builder.build(), HttpResponse.BodyHandlers.discarding()).statusCode();
            answeredAfterRetry.computeIfAbsent(request.caseName(), k -> new LongAdder()).increment();
            return status;
        } catch (HttpTimeoutException e) {
            return TIMEOUT;
        } catch (IOException e) {
            return Recorder.TRANSPORT;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return Recorder.TRANSPORT;
        }
    }

    /** Well-formed requests answered with 4xx, by kind and status (a driver or server bug either way); first answers in firstUnexpectedBody. */
    private final Map<String, LongAdder> refusedWellFormed = new ConcurrentHashMap<>();
    /** Requests that got no answer (client timeout or I/O error), by case. */
    private final Map<String, LongAdder> unanswered = new ConcurrentHashMap<>();
    private final Map<String, String> firstUnexpectedBody = new ConcurrentHashMap<>();
    private final java.util.concurrent.atomic.AtomicReference<String> firstTransportError =
            new java.util.concurrent.atomic.AtomicReference<>();

    private static long micros(long nanos) {
        return nanos / 1_000;
    }

    private void progress(Recorder recorder, long origin, Duration duration, LongAdder skipped) {
        int seen = 0;
        try {
            while (true) {
                Thread.sleep(1000);
                int now = recorder.count();
                int[] recent = new int[now - seen];
                int ok = 0;
                long errors = 0;
                for (int i = seen; i < now; i++) {
                    if (recorder.status(i) == 200) {
                        recent[ok++] = recorder.latencyMicros(i);
                    } else {
                        errors++;
                    }
                }
                int[] sorted = java.util.Arrays.copyOf(recent, ok);
                java.util.Arrays.sort(sorted);
                log.printf(Locale.ROOT, "[load] %5.1fs/%ds  done %d  last 1s: %d ok/s, %d other, p50 %.1f ms, p99 %.1f ms  in flight %d%s%n",
                        (System.nanoTime() - origin) / 1e9, duration.toSeconds(), now, ok, errors,
                        Recorder.quantile(sorted, 0.5) / 1000, Recorder.quantile(sorted, 0.99) / 1000,
                        recorder.inFlight(), skipped.sum() > 0 ? "  skipped " + skipped.sum() : "");
                seen = now;
            }
        } catch (InterruptedException finished) {
            // the run ended
        }
    }

    /** Fills the measured part of the report; answers the count of unexpected 5xx answers. */
    private long summarize(ObjectNode report, Recorder recorder, double elapsed) {
        Map<Integer, Long> byStatus = recorder.byStatus();
        ObjectNode statuses = report.putObject("status");
        long ok = 0;
        long unexpected = 0;
        for (Map.Entry<Integer, Long> entry : byStatus.entrySet()) {
            statuses.put(statusName(entry.getKey()), entry.getValue());
            if (entry.getKey() == 200) {
                ok = entry.getValue();
            }
            if (Recorder.isUnexpected(entry.getKey())) {
                unexpected += entry.getValue();
            }
        }
        report.put("requests", recorder.count());
        report.put("skipped", skippedTotal);
        report.put("elapsed_s", round(elapsed, 3));
        report.put("throughput_rps", round(ok / elapsed, 2));
        report.put("tokens_per_s", round(recorder.okTokens() / elapsed, 1));
        int[] okLatencies = recorder.successLatencies(null, 0, Long.MAX_VALUE);
        report.set("latency_ms", latencyJson(okLatencies));
        report.set("latency_histogram", histogram(okLatencies));
        ObjectNode byKind = report.putObject("latency_ms_by_kind");
        for (Workload.Kind kind : Workload.Kind.values()) {
            int[] sorted = recorder.successLatencies(kind, 0, Long.MAX_VALUE);
            if (sorted.length > 0) {
                byKind.set(kind.name().toLowerCase(Locale.ROOT), latencyJson(sorted));
            }
        }
        ObjectNode unexpectedJson = report.putObject("unexpected");
        recorder.unexpectedByCase().forEach((name, count) -> unexpectedJson.put(name, count.sum()));
        ObjectNode bodies = report.putObject("first_answers");
        firstUnexpectedBody.forEach(bodies::put);
        ObjectNode surprises = report.putObject("malformed_not_4xx");
        recorder.malformedSurprises().forEach((name, counts) -> {
            ObjectNode byCode = surprises.putObject(name);
            counts.forEach((code, count) -> byCode.put(String.valueOf(code), count.sum()));
        });
        ObjectNode refusedJson = report.putObject("well_formed_refused");
        refusedWellFormed.forEach((answer, count) -> refusedJson.put(answer, count.sum()));
        ObjectNode unansweredJson = report.putObject("unanswered");
        unanswered.forEach((name, count) -> unansweredJson.put(name, count.sum()));
        ObjectNode retriedJson = report.putObject("answered_after_retry");
        answeredAfterRetry.forEach((name, count) -> retriedJson.put(name, count.sum()));
        if (firstTransportError.get() != null) {
            report.put("first_transport_error", firstTransportError.get());
        }
        report.set("timeline", timeline(recorder, elapsed));
        report.put("unexpected_5xx", unexpected);
        return unexpected;
    }

    private static String statusName(int status) {
        return switch (status) {
            case Recorder.CANCELLED -> "cancelled";
            case Recorder.TRANSPORT -> "transport_error";
            case TIMEOUT -> "client_timeout";
            default -> Integer.toString(status);
        };
    }

    private static ObjectNode latencyJson(int[] sortedMicros) {
        ObjectNode node = JSON.createObjectNode();
        node.put("count", sortedMicros.length);
        double sum = 0;
        for (int value : sortedMicros) {
            sum += value;
        }
        node.put("mean", sortedMicros.length == 0 ? Double.NaN : round(sum / sortedMicros.length / 1000, 3));
        node.put("p50", round(Recorder.quantile(sortedMicros, 0.50) / 1000, 3));
        node.put("p90", round(Recorder.quantile(sortedMicros, 0.90) / 1000, 3));
        node.put("p99", round(Recorder.quantile(sortedMicros, 0.99) / 1000, 3));
        node.put("p99.9", round(Recorder.quantile(sortedMicros, 0.999) / 1000, 3));
        node.put("max", round(Recorder.quantile(sortedMicros, 1.0) / 1000, 3));
        return node;
    }

    /**
     * Counts of the 200 answers' latencies in buckets whose upper edges grow by √2 from 0.1 ms
     * (0.1, 0.14, 0.2, 0.28, ... ms): {"le_ms": [...], "count": [...]}, empty buckets at both ends dropped.
     */
    static ObjectNode histogram(int[] sortedMicros) {
        ObjectNode node = JSON.createObjectNode();
        ArrayNode edges = node.putArray("le_ms");
        ArrayNode counts = node.putArray("count");
        if (sortedMicros.length == 0) {
            return node;
        }
        double edge = 100; // µs
        int i = 0;
        boolean started = false;
        while (i < sortedMicros.length) {
            int count = 0;
            while (i < sortedMicros.length && sortedMicros[i] <= edge) {
                count++;
                i++;
            }
            if (count > 0 || started) {
                started = true;
                edges.add(round(edge / 1000, 3));
                counts.add(count);
            }
            edge *= Math.sqrt(2);
        }
        return node;
    }

    /** Per second of start time: 200 answers, other answers, p50 and p99 of the 200s. */
    private static ArrayNode timeline(Recorder recorder, double elapsed) {
        ArrayNode seconds = JSON.createArrayNode();
        int buckets = Math.max(1, (int) elapsed); // whole seconds: a last partial second would read as a drop
        long[] others = new long[buckets + 1];
        for (int i = 0, n = recorder.count(); i < n; i++) {
            if (recorder.status(i) != 200) {
                others[(int) Math.min(buckets, recorder.startMicros(i) / 1_000_000)]++;
            }
        }
        for (int s = 0; s < buckets; s++) {
            int[] sorted = recorder.successLatencies(null, s * 1_000_000L, (s + 1) * 1_000_000L);
            ObjectNode second = seconds.addObject();
            second.put("t", s);
            second.put("ok", sorted.length);
            second.put("other", others[s]);
            second.put("p50_ms", round(Recorder.quantile(sorted, 0.5) / 1000, 3));
            second.put("p99_ms", round(Recorder.quantile(sorted, 0.99) / 1000, 3));
        }
        return seconds;
    }

    private static double round(double value, int digits) {
        if (Double.isNaN(value) || Double.isInfinite(value)) {
            return value;
        }
        double scale = Math.pow(10, digits);
        return Math.round(value * scale) / scale;
    }

    private ObjectNode optionsJson() {
        ObjectNode node = JSON.createObjectNode();
        node.put("url", options.url().toString());
        node.put("actuator", String.valueOf(options.management()));
        node.put("model", options.model());
        Workload.Mix mix = options.mix();
        node.put("mix", "bert=" + mix.bertWeight() + ",mlp=" + mix.mlpWeight());
        node.put("bert_model", mix.bertModel());
        node.put("mlp_model", mix.mlpModel());
        node.put("batch_min", mix.batchMin());
        node.put("batch_max", mix.batchMax());
        node.put("seq_median", mix.seqMedian());
        node.put("seq_sigma", mix.seqSigma());
        node.put("seq_max", mix.seqMax());
        node.put("mlp_batch_max", mix.mlpBatchMax());
        node.put("binary", mix.binaryShare());
        node.put("malformed", mix.malformedShare());
        node.put("cancel", options.cancelShare());
        node.put("cancel_delay_ms", options.cancelDelay().toMillis());
        node.put("concurrency", options.rate() > 0 ? 0 : options.concurrency());
        node.put("rate", options.rate());
        node.put("duration_s", options.duration().toMillis() / 1000.0);
        node.put("max_requests", options.maxRequests() == Long.MAX_VALUE ? -1 : options.maxRequests());
        node.put("warmup_s", options.warmup().toMillis() / 1000.0);
        node.put("seed", options.seed());
        node.put("java", Runtime.version().toString());
        node.put("cpus", Runtime.getRuntime().availableProcessors());
        return node;
    }

    // ---- operator trims (--trim-every) --------------------------------------------------------------

    /**
     * Every {@link Options#trimEvery()} until interrupted, an operator trim of every device
     * ({@code DELETE /actuator/gpupool}), counted by status: the pool gives its free memory back and must
     * go to the device again, where a soak's faults are injected.
     */
    private void trimUntilInterrupted(Map<Integer, LongAdder> statuses) {
        while (!Thread.currentThread().isInterrupted()) {
            try {
                Thread.sleep(options.trimEvery());
            } catch (InterruptedException e) {
                return;
            }
            int status;
            try {
                status = http.send(operator(HttpRequest.newBuilder(options.management().resolve("/actuator/gpupool")))
                        .timeout(Duration.ofSeconds(10)).DELETE().build(), HttpResponse.BodyHandlers.discarding()).statusCode();
            } catch (IOException e) {
                status = Recorder.TRANSPORT;
            } catch (InterruptedException e) {
                return;
            }
            statuses.computeIfAbsent(status, k -> new LongAdder()).increment();
        }
    }

    // ---- allocation traces (--allocation-trace) ------------------------------------------------------

    /** Starts the allocation trace of every device the pool summary names; answers the devices that record. */
    private List<String> startAllocationTraces(JsonNode poolBefore) {
        List<String> started = new ArrayList<>();
        JsonNode devices = poolBefore == null ? null : poolBefore.get("devices");
        if (devices == null || options.management() == null) {
            return started;
        }
        for (String device : devices.propertyNames()) {
            if (postRecording(device, true) == 200) {
                started.add(device);
            }
        }
        return started;
    }

    /**
     * Stops the traces and writes each as CSV beside the report ({@code NAME-trace-DEVICE.csv}, the
     * format of {@link io.gpupool.memory.trace.Trace}, for {@code TraceReplayMain --trace}); answers
     * the files written per device.
     */
    private ObjectNode writeAllocationTraces(List<String> devices) {
        ObjectNode files = JSON.createObjectNode();
        Path json = options.jsonOut().toAbsolutePath();
        String name = json.getFileName().toString().replaceFirst("\\.json$", "");
        for (String device : devices) {
            postRecording(device, false);
            Path file = json.resolveSibling(name + "-trace-" + device.replace(':', '_') + ".csv");
            try {
                Files.createDirectories(file.getParent());
                HttpResponse<Path> response = http.send(operator(HttpRequest.newBuilder(
                                options.management().resolve("/actuator/gpupool/" + device + "/trace")))
                        .timeout(Duration.ofSeconds(60)).GET().build(), HttpResponse.BodyHandlers.ofFile(file));
                files.put(device, response.statusCode() == 200 ? file.getFileName().toString()
                        : "GET answered " + response.statusCode());
            } catch (IOException e) {
                files.put(device, "GET failed: " + e);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                files.put(device, "interrupted");
            }
        }
        return files;
    }

    /**
     * The operator's basic credential, from the variables the server reads (GPUPOOL_SECURITY_OPERATOR_PASSWORD,
     * _USERNAME, default operator): the trace endpoints are operator-only, and a server the comparison starts
     * inherits them.
     */
    private static HttpRequest.Builder operator(HttpRequest.Builder request) {
        String password = System.getenv("GPUPOOL_SECURITY_OPERATOR_PASSWORD");
        if (password == null || password.isEmpty()) {
            return request;
        }
        String user = System.getenv().getOrDefault("GPUPOOL_SECURITY_OPERATOR_USERNAME", "operator");
        return request.header("Authorization", "Basic " + java.util.Base64.getEncoder()
                .encodeToString((user + ":" + password).getBytes(java.nio.charset.StandardCharsets.UTF_8)));
    }

    private int postRecording(String device, boolean recording) {
        try {
            return http.send(operator(HttpRequest.newBuilder(options.management().resolve("/actuator/gpupool/" + device + "/trace")))
                    .timeout(Duration.ofSeconds(10)).header("Content-Type", "application/json")
                    .POST(HttpRequest.BodyPublishers.ofString("{\"recording\": " + recording + "}")).build(),
                    HttpResponse.BodyHandlers.discarding()).statusCode();
        } catch (IOException e) {
            return Recorder.TRANSPORT;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return Recorder.TRANSPORT;
        }
    }

    // ---- server reads -------------------------------------------------------------------------------

    private JsonNode getJson(URI uri) {
        try {
            HttpResponse<String> response = http.send(HttpRequest.newBuilder(uri).timeout(Duration.ofSeconds(10))
                    .GET().build(), HttpResponse.BodyHandlers.ofString());
            return response.statusCode() == 200 ? JSON.readTree(response.body()) : null;
        } catch (IOException | RuntimeException e) {
            return null;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return null;
        }
    }

    private int status(URI uri) {
        try {
            return http.send(HttpRequest.newBuilder(uri).timeout(Duration.ofSeconds(10)).GET().build(),
                    HttpResponse.BodyHandlers.discarding()).statusCode();
        } catch (IOException e) {
            return Recorder.TRANSPORT;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return Recorder.TRANSPORT;
        }
    }

    /**
     * What the pool endpoint says, per device: mode, the global level's byte counts and peaks,
     * fragmentation, chunks, the counters, the allocation latency and the memory admission (where the device has
     * one); and its batching section as it is (per model that batches). {"error": ...} when unreadable.
     */
    JsonNode poolSummary() {
        ObjectNode summary = JSON.createObjectNode();
        if (options.management() == null) {
            summary.put("error", "no management URL");
            return summary;
        }
        JsonNode pools;
        try {
            HttpResponse<String> response = http.send(HttpRequest.newBuilder(options.management().resolve("/actuator/gpupool"))
                    .timeout(Duration.ofSeconds(10)).GET().build(), HttpResponse.BodyHandlers.ofString());
            if (response.statusCode() != 200) {
                summary.put("error", "GET /actuator/gpupool answered " + response.statusCode());
                return summary;
            }
            pools = JSON.readTree(response.body());
        } catch (IOException | RuntimeException e) {
            summary.put("error", "GET /actuator/gpupool failed: " + e);
            return summary;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            summary.put("error", "interrupted");
            return summary;
        }
        ObjectNode devices = summary.putObject("devices");
        for (Map.Entry<String, JsonNode> entry : pools.path("devices").properties()) {
            JsonNode device = entry.getValue();
            ObjectNode out = devices.putObject(entry.getKey());
            out.put("mode", device.path("mode").asString(""));
            JsonNode global = device.path("global");
            for (String field : List.of("reservedBytes", "allocatedBytes", "requestedBytes", "cachedBytes", "freeBytes",
                    "peakReservedBytes", "peakAllocatedBytes", "peakRequestedBytes", "largestFreeBlockBytes", "chunkCount",
                    "addressSpaceBytes", "mapCalls", "unmapCalls", "crossStreamWaits", "mapNanos", "unmapNanos",
                    "physicalCreates", "physicalReleases", "retainedHandles", "retainedHandleBytes")) {
                out.put(field, global.path(field).asLong());
            }
            out.put("fragmentation", global.path("fragmentation").asDouble());
            out.put("graphBytes", device.path("graphs").path("bytes").asLong()); // 0 without graphs
            JsonNode workspaces = device.path("kernels").path("workspaces");
            out.put("workspaceBytes", workspaces.path("bytes").asLong());
            out.put("workspaceCapturedBytes", workspaces.path("capturedBytes").asLong());
            out.put("workspaceStreams", workspaces.path("streams").asInt());
            out.put("workspaceReleases", workspaces.path("releases").asLong());
            out.set("counters", device.path("counters"));
            out.set("latency", device.path("latency"));
            if (device.path("admission").isObject()) {
                out.set("admission", device.path("admission"));   // waits, refusals, runs alone under the cap
            }
        }
        if (pools.has("batching")) {
            summary.set("batching", pools.path("batching"));   // per model: queue, executions, bypassed, delay
        }
        return summary;
    }

    /**
     * What still holds a device's allocated bytes, per device of a {@link #poolSummary()}: the kernels' stream
     * workspaces (given back once the server was idle for {@code gpupool.kernels.workspace-release-after-idle}, or
     * on a trim; those a CUDA graph captured stay), the cached CUDA graphs' blocks, and the rest, which nothing the
     * server accounts for explains (a leak, or a request still running).
     */
    static String heldAfterDrain(JsonNode summary) {
        List<String> parts = new ArrayList<>();
        for (Map.Entry<String, JsonNode> entry : summary.path("devices").properties()) {
            JsonNode device = entry.getValue();
            long allocated = device.path("allocatedBytes").asLong();
            long graphs = device.path("graphBytes").asLong();
            if (allocated - graphs == 0) {
                continue;                                      // drained: what it holds is cached graphs
            }
            long workspaces = device.path("workspaceBytes").asLong();
            long captured = device.path("workspaceCapturedBytes").asLong();
            long rest = allocated - workspaces - graphs;
            StringBuilder part = new StringBuilder(entry.getKey()).append(": ").append(allocated).append(" B = ")
                    .append(workspaces).append(" B in ").append(device.path("workspaceStreams").asInt())
                    .append(" stream workspaces");
            if (captured > 0) {
                part.append(" (").append(captured).append(" B of them captured by CUDA graphs)");
            }
            part.append(" + ").append(graphs).append(" B in cached CUDA graphs (not counted) + ").append(rest)
                    .append(" B held by nothing the server accounts for");
            if (workspaces > captured) {
                part.append("; uncaptured workspaces go back after gpupool.kernels.workspace-release-after-idle "
                        + "(tools/soak.sh sets it) or a trim");
            }
            if (rest > 0) {
                part.append("; the rest is a leak or a request still running");
            }
            parts.add(part.toString());
        }
        return parts.isEmpty() ? "every device drained" : String.join("; ", parts);
    }

    /**
     * Sum over the devices of allocatedBytes less the bytes cached CUDA graphs hold (a graph keeps its pool block
     * for as long as it is cached, by design, so that memory is no leak); 0 when the endpoint could not be read or
     * lists no pool.
     */
    static long allocatedBytes(JsonNode summary) {
        long sum = 0;
        for (JsonNode device : summary.path("devices")) {
            sum += device.path("allocatedBytes").asLong() - device.path("graphBytes").asLong();
        }
        return sum;
    }

    // ---- command line -------------------------------------------------------------------------------

    static void requireLoopback(URI uri) {
        try {
            if (uri.getHost() == null || !InetAddress.getByName(uri.getHost()).isLoopbackAddress()) {
                throw new IllegalArgumentException("refusing " + uri + ": the load driver only targets loopback "
                        + "addresses (127.0.0.1, ::1, localhost)");
            }
        } catch (java.net.UnknownHostException e) {
            throw new IllegalArgumentException("unknown host in " + uri);
        }
    }

    /** Whether {@code --key} stands alone (true when given) rather than taking the next argument as its value. */
    static boolean isFlag(String key) {
        return key.equals("quiet") || key.equals("check") || key.equals("allocation-trace");
    }

    static Options parse(String... args) {
        Map<String, String> values = new LinkedHashMap<>();
        for (int i = 0; i < args.length; i++) {
            String arg = args[i];
            if (!arg.startsWith("--")) {
                throw new IllegalArgumentException("unexpected argument '" + arg + "'");
            }
            String key = arg.substring(2);
            String value;
            int eq = key.indexOf('=');
            if (eq >= 0) {
                value = key.substring(eq + 1);
                key = key.substring(0, eq);
            } else if (key.equals("help") || isFlag(key)) {
                value = "true";
            } else {
                if (i + 1 >= args.length) {
                    throw new IllegalArgumentException("--" + key + " needs a value");
                }
                value = args[++i];
            }
            values.put(key, value);
        }
        if (values.containsKey("help")) {
            throw new IllegalArgumentException("help");
        }
        Options options = fromMap(values);
        if (!values.isEmpty()) {
            throw new IllegalArgumentException("unknown option(s) " + values.keySet().stream().map(k -> "--" + k).toList());
        }
        return options;
    }

    /** Builds options from a map of option names to values, removing the names it used. */
    static Options fromMap(Map<String, String> v) {
        double[] weights = mixWeights(take(v, "mix", "bert=1"));
        Workload.Mix mix = new Workload.Mix(take(v, "bert-model", "tiny-bert"), take(v, "bert-output", "pooler_output"),
                take(v, "mlp-model", "iris-mlp"),
                weights[0], weights[1], integer(v, "batch-min", 1), integer(v, "batch-max", 8), integer(v, "seq-min", 1),
                number(v, "seq-median", 24), number(v, "seq-sigma", 0.6), integer(v, "seq-max", 64),
                integer(v, "vocab", 100), integer(v, "mlp-batch-max", 32), number(v, "binary", 0),
                number(v, "malformed", 0));
        String management = take(v, "actuator", "http://127.0.0.1:8081");
        String model = take(v, "model", "");
        String html = take(v, "html", "");
        int concurrency = integer(v, "concurrency", 8);
        double rate = number(v, "rate", 0);
        if (concurrency < 1 || concurrency > 10_000) {
            throw new IllegalArgumentException("--concurrency must be in [1, 10000], got " + concurrency);
        }
        if (rate < 0) {
            throw new IllegalArgumentException("--rate must be > 0, got " + rate);
        }
        double cancel = number(v, "cancel", 0);
        if (!(cancel >= 0 && cancel <= 1)) {
            throw new IllegalArgumentException("--cancel must be in [0, 1], got " + cancel);
        }
        String requests = take(v, "requests", "");
        long maxRequests = requests.isEmpty() ? Long.MAX_VALUE : Long.parseLong(requests);
        if (maxRequests < 1) {
            throw new IllegalArgumentException("--requests must be >= 1, got " + maxRequests);
        }
        String label = take(v, "label", "");
        Options options = new Options(URI.create(take(v, "url", "http://127.0.0.1:8080")),
                management.equals("none") ? null : URI.create(management), mix, model.isEmpty() ? null : model,
                concurrency, rate, integer(v, "max-outstanding", 1024), duration(v, "duration", "20s"), maxRequests,
                duration(v, "warmup", "3s"), cancel, duration(v, "cancel-delay", "20ms"), duration(v, "timeout", "60s"),
                duration(v, "drain", "30s"), integer(v, "distinct", 256), Long.parseLong(take(v, "seed", "1")),
                !label.isEmpty() ? label : !model.isEmpty() ? model : "bert=" + weights[0] + ",mlp=" + weights[1],
                Path.of(take(v, "out", "target/load/load.json")), html.isEmpty() ? null : Path.of(html),
                !Boolean.parseBoolean(take(v, "quiet", "false")), Boolean.parseBoolean(take(v, "check", "false")),
                Boolean.parseBoolean(take(v, "allocation-trace", "false")), duration(v, "trim-every", "0s"));
        if (options.trimEvery().isNegative() || (!options.trimEvery().isZero() && options.trimEvery().toMillis() < 10)) {
            throw new IllegalArgumentException("--trim-every must be 0 (off) or at least 10ms, got " + options.trimEvery());
        }
        if (!options.trimEvery().isZero() && options.management() == null) {
            throw new IllegalArgumentException("--trim-every needs the management URL (--actuator), not none");
        }
        if (options.duration().isZero() || options.duration().isNegative()) {
            throw new IllegalArgumentException("--duration must be > 0");
        }
        return options;
    }

    private static double[] mixWeights(String spec) {
        double bert = 0;
        double mlp = 0;
        for (String part : spec.split(",")) {
            String[] kv = part.split("=", 2);
            double weight = kv.length == 2 ? Double.parseDouble(kv[1]) : 1.0;
            switch (kv[0].trim()) {
                case "bert" -> bert = weight;
                case "mlp" -> mlp = weight;
                default -> throw new IllegalArgumentException("--mix knows bert and mlp, got '" + kv[0] + "'");
            }
        }
        return new double[] {bert, mlp};
    }

    private static String take(Map<String, String> v, String key, String fallback) {
        String value = v.remove(key);
        return value == null ? fallback : value;
    }

    private static int integer(Map<String, String> v, String key, int fallback) {
        String value = take(v, key, Integer.toString(fallback));
        try {
            return Integer.parseInt(value);
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("--" + key + " must be an integer, got '" + value + "'");
        }
    }

    private static double number(Map<String, String> v, String key, double fallback) {
        String value = take(v, key, Double.toString(fallback));
        try {
            return Double.parseDouble(value);
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("--" + key + " must be a number, got '" + value + "'");
        }
    }

    static Duration duration(Map<String, String> v, String key, String fallback) {
        return duration("--" + key, take(v, key, fallback));
    }

    /** "30s", "2m", "500ms" or plain seconds. */
    static Duration duration(String name, String text) {
        String t = text.trim().toLowerCase(Locale.ROOT);
        try {
            if (t.endsWith("ms")) {
                return Duration.ofMillis(Long.parseLong(t.substring(0, t.length() - 2)));
            }
            if (t.endsWith("s")) {
                return Duration.ofMillis((long) (Double.parseDouble(t.substring(0, t.length() - 1)) * 1000));
            }
            if (t.endsWith("m")) {
                return Duration.ofMillis((long) (Double.parseDouble(t.substring(0, t.length() - 1)) * 60_000));
            }
            return Duration.ofMillis((long) (Double.parseDouble(t) * 1000));
        } catch (NumberFormatException e) {
            // fall through to the message below
        }
        throw new IllegalArgumentException(name + " must be a duration like 30s, 2m or 500ms, got '" + text + "'");
    }
}
