package io.gpupool.serving;

import java.util.List;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentMap;
import java.util.concurrent.atomic.LongAdder;

/**
 * Executions and inferences per model, batched or not, as Triton's statistics extension counts them: an
 * execution is one forward on the device, an inference one batch row of a request ({@code inference_count});
 * with batching, several requests share an execution. Counters are {@link LongAdder}s written by the device
 * worker threads; readers take no lock and see each counter's own sum.
 */
public final class BatchStatistics {

    /** Counts of one model since start. */
    public record Snapshot(String model, long executions, long requests, long inferences, long tokens,
                           long splitsForMemory, long cancelledWhileWaiting) {
    }

    private static final class Counters {
        final LongAdder executions = new LongAdder();
        final LongAdder requests = new LongAdder();
        final LongAdder inferences = new LongAdder();
        final LongAdder tokens = new LongAdder();
        final LongAdder splits = new LongAdder();
        final LongAdder cancelled = new LongAdder();
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

    /** One forward of {@code model} ran (successfully or not) for {@code requests} requests. */
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
        observer.queueDelay(model, nanos);
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
        return c == null ? new Snapshot(model, 0, 0, 0, 0, 0, 0) : snapshot(model, c);
    }

    private static Snapshot snapshot(String model, Counters c) {
        return new Snapshot(model, c.executions.sum(), c.requests.sum(), c.inferences.sum(), c.tokens.sum(),
                c.splits.sum(), c.cancelled.sum());
    }
}
