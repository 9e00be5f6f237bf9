package io.gpupool.serving;

import io.gpupool.model.BatchableModel;
import io.gpupool.model.InferenceModel;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentMap;
import java.util.concurrent.Executor;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.function.LongSupplier;

/**
 * Dynamic batching for the served models: one {@link BatchQueue} per model version and device, created on the
 * model's first request there, for the models whose policy ({@link BatchPolicy.Defaults#resolve}) turns batching
 * on and whose replica is a {@link BatchableModel}. One daemon timer thread serves every queue's delay; the members
 * of finished batches are encoded and answered on an executor shared by every queue: by default one daemon thread
 * per core (at least two) behind one shared queue, so that a member with a large output (a whole
 * last_hidden_state) holds up only the thread encoding it, never tasks queued behind it on that thread as on a
 * per-thread queue.
 */
public final class DynamicBatcher implements AutoCloseable {

    private static final Logger log = LoggerFactory.getLogger(DynamicBatcher.class);

    /**
     * One model's batching as a replica runs it, for the actuator and logs; {@code batchesInFlight}: most of its
     * batches running at once on the device.
     */
    public record Description(String model, String version, int device, String layout, BatchPolicy policy,
                              int batchesInFlight) {
    }

    private final Map<Integer, DeviceWorker> workers;
    private final Map<Integer, LongSupplier> headroom;
    private final BatchPolicy.Defaults defaults;
    private final int queueCapacity;
    /** 0: one batch per stream. */
    private final int batchesPerDevice;
    private final BatchStatistics statistics;
    private final ScheduledExecutorService timer;
    private final Executor answering;
    /** The default answering executor, which this batcher owns and stops; null when the caller gave one. */
    private final ExecutorService ownAnswering;
    private final ConcurrentMap<QueueKey, BatchQueue> queues = new ConcurrentHashMap<>();
    /** Models whose policy says no batching, so the lookup is not repeated per request. */
    private final ConcurrentMap<QueueKey, Boolean> unbatched = new ConcurrentHashMap<>();

    /**
     * @param headroom      per device index, the bytes a batch may plan for now (the pool's cap minus what it hands
     *                      out); a device without an entry is not bounded
     * @param queueCapacity requests that may wait for a batch, per model and device; one more is refused with 503
     */
    public DynamicBatcher(List<DeviceRuntime> devices, BatchPolicy.Defaults defaults, int queueCapacity,
                          Map<Integer, LongSupplier> headroom, BatchStatistics statistics) {
        this(devices, defaults, queueCapacity, headroom, statistics, null);
    }

    /**
     * @param answering encodes and answers each member of a finished batch, off the device's worker threads; a
     *                  task it refuses ({@link java.util.concurrent.RejectedExecutionException}) runs where the
     *                  batch finished; null: one daemon thread per core (at least two), stopped by {@link #close}
     */
    public DynamicBatcher(List<DeviceRuntime> devices, BatchPolicy.Defaults defaults, int queueCapacity,
                          Map<Integer, LongSupplier> headroom, BatchStatistics statistics, @Nullable Executor answering) {
        this(devices, defaults, queueCapacity, headroom, statistics, answering, 0);
    }

    /**
     * @param batchesPerDevice most batches of one model running at once on a device; 0: one per stream. Fewer than
     *                         the streams makes the batches larger under load (requests gather while the batches
     *                         run), and leaves the other streams to requests that run alone
     */
    public DynamicBatcher(List<DeviceRuntime> devices, BatchPolicy.Defaults defaults, int queueCapacity,
                          Map<Integer, LongSupplier> headroom, BatchStatistics statistics, @Nullable Executor answering,
                          int batchesPerDevice) {
        if (batchesPerDevice < 0) {
            throw new IllegalArgumentException("batches per device = " + batchesPerDevice
                    + " is invalid; allowed: >= 0 (0: one per stream)");
        }
        this.batchesPerDevice = batchesPerDevice;
        this.ownAnswering = answering != null ? null
                : Executors.newFixedThreadPool(Math.max(2, Runtime.getRuntime().availableProcessors()),
                        Thread.ofPlatform().name("gpupool-batch-answer-", 0).daemon(true).factory());
        this.answering = answering == null ? ownAnswering : answering;
        Map<Integer, DeviceWorker> byIndex = new java.util.TreeMap<>();
        for (DeviceRuntime device : devices) {
            byIndex.put(device.index(), device.worker());
        }
        this.workers = Map.copyOf(byIndex);
        this.headroom = Map.copyOf(headroom);
        this.defaults = defaults;
        this.queueCapacity = queueCapacity;
        this.statistics = statistics;
        ScheduledThreadPoolExecutor executor = new ScheduledThreadPoolExecutor(1,
                Thread.ofPlatform().name("gpupool-batch-timer").daemon(true).factory());
        executor.setRemoveOnCancelPolicy(true);
        this.timer = Executors.unconfigurableScheduledExecutorService(executor);
    }

    /** Executions and inferences per model. */
    public BatchStatistics statistics() {
        return statistics;
    }

    /** The batch queue of {@code model} on {@code device}, or null when that model does not batch. */
    BatchQueue queue(ServedModel model, int device) {
        QueueKey key = new QueueKey(model, device);
        BatchQueue queue = queues.get(key);
        if (queue != null || unbatched.containsKey(key)) {
            return queue;
        }
        InferenceModel replica = model.replicas().get(device);
        BatchPolicy policy = replica instanceof BatchableModel batchable
                ? defaults.resolve(model.name(), batchable.batching()) : null;
        DeviceWorker worker = workers.get(device);
        if (policy == null || worker == null) {
            unbatched.put(key, Boolean.TRUE);
            return null;
        }
        LongSupplier room = headroom.getOrDefault(device, () -> Long.MAX_VALUE);
        return queues.computeIfAbsent(key, k -> {
            BatchableModel batchable = (BatchableModel) replica;
            int streams = worker.streams().size();
            int slots = batchesPerDevice == 0 ? streams : Math.min(batchesPerDevice, streams);
            log.info("Model '{}' version {} batches on device {} ({} layout, {} of {} streams): {}", model.name(),
                    model.version(), device, batchable.batchLayout(), slots, streams, policy);
            return new BatchQueue(model.name(), batchable, policy, worker, slots, queueCapacity, room, timer, answering,
                    statistics, model.statistics());
        });
    }

    /**
     * {@code model}'s batching as Triton's model configuration shows it ({@code dynamic_batching}:
     * {@code max_queue_delay_microseconds}, {@code preferred_batch_size}, and ours, {@code max_batch_requests}
     * and {@code max_batch_tokens}), or null when it does not batch.
     */
    public @Nullable Map<String, Object> tritonSection(ServedModel model) {
        BatchPolicy policy = policy(model);
        if (policy == null) {
            return null;
        }
        Map<String, Object> section = new LinkedHashMap<>();
        section.put("preferred_batch_size", Arrays.stream(policy.preferredBatchSizes()).boxed().toList());
        section.put("max_queue_delay_microseconds", policy.maxQueueDelay().toNanos() / 1_000);
        section.put("max_batch_requests", policy.maxRequests());
        section.put("max_batch_tokens", policy.maxTokens());
        return section;
    }

    /**
     * How {@code model} batches, or null when it does not: not a {@link BatchableModel}, batching off, or settings
     * that do not validate (its first request reports them; until then it shows as not batching).
     */
    public @Nullable BatchPolicy policy(ServedModel model) {
        InferenceModel replica = model.replicas().values().stream().findFirst().orElse(null);
        if (!(replica instanceof BatchableModel batchable)) {
            return null;
        }
        try {
            return defaults.resolve(model.name(), batchable.batching());
        } catch (IllegalArgumentException e) {
            return null;
        }
    }

    /** Requests of {@code model} waiting for a batch now, per device index (devices it has not queued on: none). */
    public Map<Integer, Integer> waiting(ServedModel model) {
        Map<Integer, Integer> byDevice = new java.util.TreeMap<>();
        queues.forEach((key, queue) -> {
            if (key.model() == model) {
                byDevice.put(key.device(), queue.waiting());
            }
        });
        return byDevice;
    }

    /** Requests waiting for a batch on {@code device}, all models together. */
    int waiting(int device) {
        int total = 0;
        for (Map.Entry<QueueKey, BatchQueue> e : queues.entrySet()) {
            if (e.getKey().device() == device) {
                total += e.getValue().waiting();
            }
        }
        return total;
    }

    /** How each model that received a request batches, per device. */
    public List<Description> describe() {
        List<Description> out = new ArrayList<>();
        queues.forEach((key, queue) -> {
            out.add(new Description(key.model().name(), key.model().version(), key.device(), queue.replica().batchLayout(),
                    queue.policy(), queue.slots()));
        });
        out.sort(java.util.Comparator.comparing(Description::model).thenComparingInt(Description::device));
        return out;
    }

    /** Answers every waiting request with 503 and stops the timer; running batches finish. */
    @Override
    public void close() {
        queues.values().forEach(BatchQueue::close);
        timer.shutdownNow();
        if (ownAnswering != null) {
            ownAnswering.shutdown();                 // answers already queued still go out; later ones run in place
        }
    }

    /**
     * A queue per served instance and device: the instance, not its name, so that a model loaded again (new
     * replicas) gets new queues. ServedModel keeps identity equality.
     */
    private record QueueKey(ServedModel model, int device) {
    }
}
