package io.gpupool.serving;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentMap;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;

/**
 * What one served model did since it was loaded, in the terms of Triton's statistics extension, plus
 * the device memory it holds (which no peer reports).
 *
 * <p>Two kinds of event feed it, so that a batcher can merge requests without changing the figures'
 * meaning:
 * <pre>
 *   request  (one client request, batch b)   recordSuccess / recordFailure
 *              success, fail:   count +1, ns += arrival-to-answer time
 *              queue:           count +1, ns += time waiting for a stream
 *              inference_count  += b                    (successful requests only, as Triton)
 *   execution (one forward over B rows)      recordExecution(B, input, infer, output)
 *              execution_count  += 1
 *              compute_input / compute_infer / compute_output:  count +1, ns += each phase
 *              batch_stats[B]:  the same three phases, for executions of exactly B rows
 *   batched execution                        recordExecution(B, input, infer) when the forward ends,
 *                                            recordOutput(B, output) once every member is encoded
 * </pre>
 * Without a batcher each request is one execution ({@code execution_count == } successful requests).
 * {@code execution_count} counts successful forwards only, as Triton's: a forward that ran out of device memory
 * and was run again alone by the admission is one execution (the run that answered), and a request that ran out
 * of memory alone too is one failure with no execution. The success and fail counts are per client request,
 * recorded once when it is answered, however many times it ran; the queue time of a request run again alone
 * lasts until the run that answered it started. How often the admission ran a request again alone is its own
 * counter ({@code gpupool.memory.admission.alone}), not an execution here.
 * The phases are: {@code compute_input} = copying the request's inputs into native memory (the
 * model's upload to the device is inside {@code compute_infer}, which spans the model's whole run),
 * {@code compute_output} = serialising the answer.
 *
 * <p>Device memory: {@link #weightBytes()} is set when the replicas are loaded and cleared when they
 * are unloaded; request bytes are the planned peak of every running request of this model
 * ({@link io.gpupool.model.PlannedMemory#peakActivationBytes}), added when it starts computing and
 * removed when it ends, with the highest total seen kept as the peak.
 *
 * <p>Every counter is a {@link LongAdder} (many writers, rare readers) except the peaks and the last
 * inference time, which are updated with a compare-and-set loop; no reader takes a lock.
 */
public final class ModelStatistics {

    /** A duration statistic: how many events and their total nanoseconds. */
    public static final class Duration {
        private final LongAdder count = new LongAdder();
        private final LongAdder nanos = new LongAdder();

        void record(long ns) {
            count.increment();
            nanos.add(Math.max(0, ns));
        }

        public long count() {
            return count.sum();
        }

        public long nanos() {
            return nanos.sum();
        }
    }

    /** The three compute phases of the executions of one batch size. */
    public static final class BatchPhases {
        private final int batchSize;
        private final Duration computeInput = new Duration();
        private final Duration computeInfer = new Duration();
        private final Duration computeOutput = new Duration();

        BatchPhases(int batchSize) {
            this.batchSize = batchSize;
        }

        public int batchSize() {
            return batchSize;
        }

        public Duration computeInput() {
            return computeInput;
        }

        public Duration computeInfer() {
            return computeInfer;
        }

        public Duration computeOutput() {
            return computeOutput;
        }
    }

    private final Duration success = new Duration();
    private final Duration fail = new Duration();
    private final Duration queue = new Duration();
    private final Duration computeInput = new Duration();
    private final Duration computeInfer = new Duration();
    private final Duration computeOutput = new Duration();
    private final LongAdder inferenceCount = new LongAdder();
    private final LongAdder executionCount = new LongAdder();
    private final ConcurrentMap<Integer, BatchPhases> batches = new ConcurrentHashMap<>();
    /** Milliseconds since the epoch of the last successful request's answer; 0 before the first. */
    private final AtomicLong lastInferenceMillis = new AtomicLong();
    private final AtomicLong requestBytes = new AtomicLong();
    private final AtomicLong requestPeakBytes = new AtomicLong();
    private volatile long weightBytes;
    private final AtomicLong weightPeakBytes = new AtomicLong();

    /**
     * A request of {@code batch} rows was answered successfully.
     *
     * @param totalNs arrival (queued) to answer
     * @param queueNs time spent waiting for a stream
     */
    public void recordSuccess(long batch, long totalNs, long queueNs) {
        success.record(totalNs);
        queue.record(queueNs);
        inferenceCount.add(batch);
        lastInferenceMillis.accumulateAndGet(System.currentTimeMillis(), Math::max);
    }

    /** A request that reached the model's queue failed (the model refused it, out of memory, timeout). */
    public void recordFailure(long totalNs) {
        fail.record(totalNs);
    }

    /**
     * One forward of the model over {@code batchSize} rows (a batcher calls this once per merged batch).
     *
     * @param inputNs  preparing the inputs
     * @param inferNs  the model's run
     * @param outputNs serialising the outputs
     */
    public void recordExecution(int batchSize, long inputNs, long inferNs, long outputNs) {
        recordExecution(batchSize, inputNs, inferNs);
        recordOutput(batchSize, outputNs);
    }

    /**
     * The forward part of {@link #recordExecution(int, long, long, long)}, for a batcher that serialises the outputs
     * after the forward, member by member and in parallel: counted before the first member is answered, so that a
     * client that has its answer finds its execution counted; the output phase follows with {@link #recordOutput}.
     */
    public void recordExecution(int batchSize, long inputNs, long inferNs) {
        executionCount.increment();
        computeInput.record(inputNs);
        computeInfer.record(inferNs);
        BatchPhases phases = batches.computeIfAbsent(batchSize, BatchPhases::new);
        phases.computeInput.record(inputNs);
        phases.computeInfer.record(inferNs);
    }

    /** Serialising the outputs of an execution of {@code batchSize} rows, counted by {@link #recordExecution(int, long, long)}. */
    public void recordOutput(int batchSize, long outputNs) {
        computeOutput.record(outputNs);
        batches.computeIfAbsent(batchSize, BatchPhases::new).computeOutput.record(outputNs);
    }

    /** A request holding {@code bytes} of device memory at its planned peak starts computing. */
    public void requestStarted(long bytes) {
        long now = requestBytes.addAndGet(bytes);
        requestPeakBytes.accumulateAndGet(now, Math::max);
    }

    /** The request that {@link #requestStarted} announced ended. */
    public void requestEnded(long bytes) {
        requestBytes.addAndGet(-bytes);
    }

    /** The model's weights now occupy {@code bytes} on its devices (0 once unloaded). */
    public void weightsLoaded(long bytes) {
        weightBytes = bytes;
        weightPeakBytes.accumulateAndGet(bytes, Math::max);
    }

    public Duration success() {
        return success;
    }

    public Duration fail() {
        return fail;
    }

    public Duration queue() {
        return queue;
    }

    public Duration computeInput() {
        return computeInput;
    }

    public Duration computeInfer() {
        return computeInfer;
    }

    public Duration computeOutput() {
        return computeOutput;
    }

    /** Rows inferred by successful requests. */
    public long inferenceCount() {
        return inferenceCount.sum();
    }

    /** Model executions (forwards). */
    public long executionCount() {
        return executionCount.sum();
    }

    public long lastInferenceMillis() {
        return lastInferenceMillis.get();
    }

    /** Executions per batch size, smallest first. */
    public List<BatchPhases> batches() {
        List<BatchPhases> sorted = new ArrayList<>(batches.values());
        sorted.sort((a, b) -> Integer.compare(a.batchSize, b.batchSize));
        return sorted;
    }

    public long weightBytes() {
        return weightBytes;
    }

    public long weightPeakBytes() {
        return weightPeakBytes.get();
    }

    /** Planned device bytes of the requests computing now. */
    public long requestBytes() {
        return requestBytes.get();
    }

    public long requestPeakBytes() {
        return requestPeakBytes.get();
    }
}
