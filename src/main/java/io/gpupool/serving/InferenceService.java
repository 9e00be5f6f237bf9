package io.gpupool.serving;

import io.gpupool.memory.OutOfDeviceMemoryException;
import io.gpupool.model.BatchableModel;
import io.gpupool.model.ExecutionContext;
import io.gpupool.model.HostTensor;
import io.gpupool.model.InferenceModel;
import io.gpupool.model.PlannedMemory;
import reactor.core.publisher.Mono;
import tools.jackson.databind.ObjectMapper;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * Runs validated requests: picks the least-loaded device that holds the model, queues the request
 * on that device's {@link DeviceWorker} with its planned activation peak in the pool's blocks (what the
 * device's memory admission reserves before it runs), and bounds the whole wait-plus-run by the
 * request's timeout.
 *
 * <p>On the worker thread, the request's inputs are copied into native memory of a confined arena,
 * the model runs on the leased stream, the response is serialised, and the arena is closed, all
 * before the stream lease is returned. Nothing of a request outlives its job.
 *
 * <p>A model that batches ({@link DynamicBatcher}) takes another road after the device is picked: its request
 * is validated and converted on the calling thread, waits in the model's {@link BatchQueue} and runs inside
 * a batch's job; the same timeout bounds the wait and the run, and cancelling leaves the batch queue. A request
 * that fills a batch alone ({@link BatchQueue#bypasses}) takes the road of a model that does not batch.
 */
public final class InferenceService {

    private final Map<Integer, DeviceWorker> workers;
    private final ResponseEncoder encoder;
    private final InferenceObserver observer;
    /** Null: no model batches. */
    private final DynamicBatcher batcher;
    private final BatchStatistics statistics;

    public InferenceService(List<DeviceRuntime> devices, ObjectMapper json) {
        this(devices, json, InferenceObserver.NONE);
    }

    public InferenceService(List<DeviceRuntime> devices, ObjectMapper json, InferenceObserver observer) {
        this(devices, json, observer, null);
    }

    /** @param batcher queues the requests of the models that batch; null: every request runs alone */
    public InferenceService(List<DeviceRuntime> devices, ObjectMapper json, InferenceObserver observer,
                            DynamicBatcher batcher) {
        this.observer = observer;
        this.batcher = batcher;
        this.statistics = batcher != null ? batcher.statistics() : new BatchStatistics();
        Map<Integer, DeviceWorker> byIndex = new java.util.TreeMap<>();
        for (DeviceRuntime device : devices) {
            byIndex.put(device.index(), device.worker());
        }
        this.workers = Map.copyOf(byIndex);
        this.encoder = new ResponseEncoder(json);
    }

    /**
     * @return the serialised response; fails with 503 when the chosen device's queue is full, 504 on
     * timeout (waiting for memory or a stream included), 507 at once when the request's planned peak alone
     * exceeds what the device's pool can give, or with whatever the model threw
     */
    public Mono<EncodedResponse> infer(ValidatedRequest request) {
        ServedModel model = request.model();
        int device = leastLoaded(model);
        InferenceModel replica = model.replicas().get(device);
        DeviceWorker worker = workers.get(device);
        BatchQueue batchQueue = batcher == null ? null : batcher.queue(model, device);
        // A request that fills a batch alone runs at once, as without batching: waiting could only delay it.
        boolean bypassed = batchQueue != null && batchQueue.bypasses(rows(request), tokens(request), sequence(request));
        BatchQueue queue = bypassed ? null : batchQueue;
        InferenceObserver.Tracker tracker = observer.enqueued(model.name(), device);
        ModelStatistics statistics = model.statistics();
        long queued = System.nanoTime();
        long[] started = {0};
        Mono<EncodedResponse> answer = queue == null
                ? worker.submit(charge(replica, request, worker), context -> {
                    started[0] = System.nanoTime();
                    tracker.started();
                    return run(replica, request, context, bypassed);
                })
                : Mono.defer(() -> {
                    // counted as running from the queue on, so that an unload waits for it as for one alone
                    if (!model.enter()) {
                        return Mono.error(ServingException.beingUnloaded(model.name()));
                    }
                    Mono<EncodedResponse> submitted;
                    try {
                        submitted = queue.submit(prepare(queue, request), () -> {
                            started[0] = System.nanoTime();
                            tracker.started();
                        }, outputs -> encoder.encode(request, outputs));
                    } catch (RuntimeException rejected) {
                        model.exit();          // refused before it joined a batch: an unload must not wait for it
                        throw rejected;
                    }
                    return submitted.doFinally(signal -> model.exit());
                });
        return answer
                .timeout(request.timeout(), Mono.error(() -> ServingException.timedOut(request.timeout())))
                .doOnSuccess(response -> {
                    tracker.finished(200);
                    statistics.recordSuccess(request.batchSize(), System.nanoTime() - queued, started[0] - queued);
                })
                .doOnError(failure -> {
                    tracker.finished(ErrorStatus.of(failure));
                    statistics.recordFailure(System.nanoTime() - queued);
                })
                .doOnCancel(() -> tracker.finished(InferenceObserver.CANCELLED));
    }

    /** Executions and inferences per model, batched or not (Triton's execution_count and inference_count). */
    public BatchStatistics statistics() {
        return statistics;
    }

    /** The request's planned activation peak in the pool's blocks, which it reserves before it runs (0: no plan). */
    private static long charge(InferenceModel replica, ValidatedRequest request, DeviceWorker worker) {
        return replica instanceof PlannedMemory planned
                ? planned.peakActivationBytes(request.batchSize(), request.sequenceLength(), worker.admission()::blockBytes)
                : 0;
    }

    /** Validates and converts the request for its batch queue; a request it rejects never joins a batch. */
    private static BatchableModel.Member prepare(BatchQueue queue, ValidatedRequest request) {
        List<HostTensor> inputs = new ArrayList<>(request.inputs().size());
        for (ValidatedRequest.Input input : request.inputs()) {
            inputs.add(new HostTensor(input.name(), input.dataType(), input.shape(), MemorySegment.ofArray(input.data())));
        }
        try {
            return queue.replica().prepare(inputs, wanted(request));
        } catch (IllegalArgumentException e) {
            throw ServingException.badRequest("model '" + request.model().name() + "' rejected the request: "
                    + e.getMessage());
        }
    }

    private static Set<String> wanted(ValidatedRequest request) {
        Set<String> wanted = new LinkedHashSet<>();
        request.outputs().forEach(output -> wanted.add(output.name()));
        return wanted;
    }

    private int leastLoaded(ServedModel model) {
        return model.replicas().keySet().stream()
                .filter(workers::containsKey)
                .min(Comparator.comparingInt((Integer index) -> workers.get(index).load()
                        + (batcher == null ? 0 : batcher.waiting(index))).thenComparing(i -> i))
                .orElseThrow(() -> new IllegalStateException("model '" + model.name() + "' has no replica on a running device"));
    }

    /**
     * One forward of a request alone ran to its end, with outputs or with the model's own error: counted once, so a
     * forward cut short by out-of-device-memory and run again alone counts as the one execution the client sees.
     */
    private void executed(ValidatedRequest request, boolean bypassed) {
        String name = request.model().name();
        statistics.executed(name, 1, rows(request), tokens(request));
        if (bypassed) {
            statistics.bypassed(name);
        }
    }

    /** @param bypassed the request skipped its model's batch queue (it fills a batch alone) */
    private EncodedResponse run(InferenceModel replica, ValidatedRequest request, ExecutionContext context,
                                boolean bypassed) {
        ModelStatistics statistics = request.model().statistics();
        long plannedBytes = replica instanceof PlannedMemory planned
                ? planned.peakActivationBytes(request.batchSize(), request.sequenceLength()) : 0;
        if (!request.model().enter()) {
            throw ServingException.beingUnloaded(request.model().name());
        }
        statistics.requestStarted(plannedBytes);
        long begin = System.nanoTime();
        try (Arena arena = Arena.ofConfined()) {
            List<HostTensor> inputs = new ArrayList<>(request.inputs().size());
            for (ValidatedRequest.Input input : request.inputs()) {
                MemorySegment data = arena.allocate(Math.max(1, input.data().length), 64)
                        .asSlice(0, input.data().length);
                MemorySegment.copy(MemorySegment.ofArray(input.data()), 0, data, 0, input.data().length);
                inputs.add(new HostTensor(input.name(), input.dataType(), input.shape(), data));
            }
            Set<String> wanted = wanted(request);
            List<HostTensor> outputs;
            long inputsReady = System.nanoTime();
            boolean outOfMemory = false;
            try {
                outputs = replica.infer(inputs, wanted, context);
            } catch (OutOfDeviceMemoryException e) {
                outOfMemory = true;        // no execution: the worker runs it again alone (that run counts) or answers 507
                throw e;
            } catch (IllegalArgumentException e) {
                // Input the model checks itself beyond its declared signature (e.g. a token id outside the vocabulary).
                throw ServingException.badRequest("model '" + request.model().name() + "' rejected the request: "
                        + e.getMessage());
            } finally {
                if (!outOfMemory) {
                    executed(request, bypassed);
                }
            }
            long inferred = System.nanoTime();
            EncodedResponse response = encoder.encode(request, outputs);
            statistics.recordExecution(request.batchSize(), inputsReady - begin, inferred - inputsReady,
                    System.nanoTime() - inferred);
            return response;
        } finally {
            statistics.requestEnded(plannedBytes);
            request.model().exit();
        }
    }

    /** Batch rows of a request alone: the first dimension of its first input. */
    private static int rows(ValidatedRequest request) {
        long[] shape = request.inputs().isEmpty() ? new long[0] : request.inputs().getFirst().shape();
        return shape.length == 0 ? 1 : (int) shape[0];
    }

    /** The sequence length of a request for a model with a sequence axis, else 0 (as a batch member counts it). */
    private static int sequence(ValidatedRequest request) {
        long[] shape = request.inputs().isEmpty() ? new long[0] : request.inputs().getFirst().shape();
        return request.model().maxSequenceLength() > 0 && shape.length >= 2 ? (int) shape[1] : 0;
    }

    /** Tokens of a request alone: rows × sequence for a model with a sequence axis, else rows. */
    private static int tokens(ValidatedRequest request) {
        long[] shape = request.inputs().isEmpty() ? new long[0] : request.inputs().getFirst().shape();
        return request.model().maxSequenceLength() > 0 && shape.length >= 2 ? (int) (shape[0] * shape[1]) : rows(request);
    }
}
