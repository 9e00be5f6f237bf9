package io.gpupool.serving;

import io.gpupool.memory.metric.LatencyDistribution;
import io.gpupool.memory.metric.Log2Histogram;

import java.util.List;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentMap;
import java.util.concurrent.atomic.LongAdder;

/**
 * Executions and inferences per model, batched or not, as Triton's statistics extension counts them: an
 * execution is one forward on the device, an inference one batch row of a request ({@code inference_count});
 * with batching, several requests share an execution. Counters are {@link LongAdder}s written by the device
 * worker threads; readers take no lock and see each counter's own sum, so a snapshot's fields may come from
 * slightly different instants.
 *
 * <p>An execution is a forward that ran to its end, with outputs or with the model's own error. A forward cut short
 * by out-of-device-memory is none: the device worker runs it again alone, and that run is the one execution its
 * clients see (a request that runs out of memory alone too is answered 507 with no execution). So every counter
 * here counts what its clients were served, once, however often the admission had to retry it.
 *
 * <p>The queue delay is kept for the requests that went through a batch queue only, once per request: a request
 * that bypassed it (it filled a batch alone, see {@code BatchQueue#bypasses}) is counted in {@code bypassed} and in
 * the executions when its forward ran (a bypass the device queue refused with 503 never ran and is in neither),
 * never as a zero delay, so that the delay figures say what waiting for company costs.
 */
public final class BatchStatistics {

    /** Counts of one model since start. */
    public record Snapshot(String model, long executions, long requests, long inferences, long tokens,
                           long splitsForMemory, long cancelledWhileWaiting, long bypassed, QueueDelay queueDelay,
                           Phases phases) {
    }

    /**
     * Where a batched execution's time goes, summed since start: {@code forwards} batched forwards took
     * {@code forwardNanos} on their stream (inputs staged, the forward enqueued and synchronised, outputs sliced);
     * {@code answers} members then waited {@code answerWaitNanos} for the answering executor after their forward
     * ended and took {@code encodeNanos} to encode. Requests that ran alone are in none of these.
     */
    public record Phases(long forwards, long forwardNanos, long answers, long answerWaitNanos, long encodeNanos) {

        /** Mean nanoseconds a batched forward held its stream; 0 when none ran. */
        public long meanForwardNanos() {
            return forwards == 0 ? 0 : forwardNanos / forwards;
        }

        /** Mean nanoseconds from a forward's end to its member's encoding start; 0 when none was answered. */
        public long meanAnswerWaitNanos() {
            return answers == 0 ? 0 : answerWaitNanos / answers;
        }

        /** Mean nanoseconds to encode one member's response; 0 when none was answered. */
        public long meanEncodeNanos() {
            return answers == 0 ? 0 : encodeNanos / answers;
        }
    }

    /**
     * How long the queued requests of one model waited for their batch: count, total, and percentiles as
     * {@link LatencyDistribution} answers them (upper bounds of power-of-two buckets: exact to a factor of two).
     */
    public record QueueDelay(long count, long totalNanos, long p50Nanos, long p90Nanos, long p99Nanos, long maxNanos) {

        static QueueDelay of(long totalNanos, LatencyDistribution distribution) {
            return new QueueDelay(distribution.count(), totalNanos, distribution.percentileNanos(0.5),
                    distribution.percentileNanos(0.9), distribution.percentileNanos(0.99),
                    distribution.percentileNanos(1.0));
        }

        /** Mean nanoseconds per queued request; 0 when none was queued. */
        public long meanNanos() {
            return count == 0 ? 0 : totalNanos / count;
        }
    }

    private static final class Counters {
        final LongAdder executions = new LongAdder();
        final LongAdder requests = new LongAdder();
        final LongAdder inferences = new LongAdder();
        final LongAdder tokens = new LongAdder();
        final LongAdder splits = new LongAdder();
        final LongAdder cancelled = new LongAdder();
        final LongAdder bypassed = new LongAdder();
        final LongAdder queueDelayNanos = new LongAdder();
        final Log2Histogram queueDelay = new Log2Histogram();
        final LongAdder forwards = new LongAdder();
        final LongAdder forwardNanos = new LongAdder();
        final LongAdder answers = new LongAdder();
        final LongAdder answerWaitNanos = new LongAdder();
        final LongAdder encodeNanos = new LongAdder();
    }

    private final ConcurrentMap<String, Counters> models = new ConcurrentHashMap<>();
    private final BatchObserver observer;

    public BatchStatistics() {
        this(BatchObserver.NONE);
    }

    /** @param observer also told of every execution and queue delay (the meters) */
    public BatchStatistics(BatchObserver observer) {
        this.observer = observer;
    }

    /** One forward of {@code model} ran to its end (outputs or the model's own error) for {@code requests} requests. */
    void executed(String model, int requests, int rows, int tokens) {
        Counters c = of(model);
        c.executions.increment();
        c.requests.add(requests);
        c.inferences.add(rows);
        c.tokens.add(tokens);
        observer.executed(model, requests, rows, tokens);
    }

    /** A request of {@code model} waited {@code nanos} in its batch queue before its forward started. */
    void queueDelay(String model, long nanos) {
        Counters c = of(model);
        c.queueDelayNanos.add(Math.max(0, nanos));
        c.queueDelay.record(nanos);
        observer.queueDelay(model, nanos);
    }

    /** A batched forward of {@code model} held its stream for {@code nanos} (staging, forward, slicing). */
    void forward(String model, long nanos) {
        Counters c = of(model);
        c.forwards.increment();
        c.forwardNanos.add(Math.max(0, nanos));
    }

    /**
     * A member of a batched forward of {@code model} waited {@code waitNanos} for the answering executor after the
     * forward ended, then took {@code encodeNanos} to encode.
     */
    void answered(String model, long waitNanos, long encodeNanos) {
        Counters c = of(model);
        c.answers.increment();
        c.answerWaitNanos.add(Math.max(0, waitNanos));
        c.encodeNanos.add(Math.max(0, encodeNanos));
    }

    /**
     * A request of {@code model} ran at once, outside its batch queue, because it filled a batch alone: called with
     * its execution, so a bypass refused by the device queue (503) is never counted.
     */
    void bypassed(String model) {
        of(model).bypassed.increment();
        observer.bypassed(model);
    }

    /** A batch of {@code model} was closed early because one more request would not fit in the pool's cap. */
    void splitForMemory(String model) {
        of(model).splits.increment();
    }

    /** A request of {@code model} left its batch queue before its batch ran (cancelled, timed out). */
    void cancelledWhileWaiting(String model) {
        of(model).cancelled.increment();
    }

    private Counters of(String model) {
        return models.computeIfAbsent(model, m -> new Counters());
    }

    /** Forwards run for {@code model} since start (Triton's {@code execution_count}). */
    public long executionCount(String model) {
        Counters c = models.get(model);
        return c == null ? 0 : c.executions.sum();
    }

    /** Batch rows served for {@code model} since start (Triton's {@code inference_count}). */
    public long inferenceCount(String model) {
        Counters c = models.get(model);
        return c == null ? 0 : c.inferences.sum();
    }

    /** Every model that ran at least once. */
    public List<Snapshot> snapshot() {
        return models.entrySet().stream().sorted(java.util.Map.Entry.comparingByKey())
                .map(e -> snapshot(e.getKey(), e.getValue())).toList();
    }

    /** One model's counts (all zero if it never ran). */
    public Snapshot snapshot(String model) {
        Counters c = models.get(model);
        return snapshot(model, c == null ? new Counters() : c);
    }

    private static Snapshot snapshot(String model, Counters c) {
        return new Snapshot(model, c.executions.sum(), c.requests.sum(), c.inferences.sum(), c.tokens.sum(),
                c.splits.sum(), c.cancelled.sum(), c.bypassed.sum(),
                QueueDelay.of(c.queueDelayNanos.sum(), c.queueDelay),
                new Phases(c.forwards.sum(), c.forwardNanos.sum(), c.answers.sum(), c.answerWaitNanos.sum(),
                        c.encodeNanos.sum()));
    }
}
