package io.gpupool.actuate;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import io.gpupool.memory.PoolConfig;
import io.gpupool.memory.PoolTuning;
import io.gpupool.memory.metric.AdmissionMetrics;
import io.gpupool.memory.metric.AllocatorCounters;
import io.gpupool.memory.metric.ChunkMetric;
import io.gpupool.memory.metric.FreeOrderMetric;
import io.gpupool.memory.metric.LatencyDistribution;
import io.gpupool.memory.metric.PoolMetrics;
import io.gpupool.memory.metric.SizeClassMetric;
import io.gpupool.model.graph.GraphCacheControl;
import io.gpupool.model.graph.GraphCacheMetrics;
import io.gpupool.model.graph.GraphLimits;
import org.jspecify.annotations.Nullable;
import org.springframework.boot.actuate.endpoint.annotation.DeleteOperation;
import org.springframework.boot.actuate.endpoint.annotation.Endpoint;
import org.springframework.boot.actuate.endpoint.annotation.ReadOperation;
import org.springframework.boot.actuate.endpoint.annotation.Selector;
import org.springframework.boot.actuate.endpoint.annotation.WriteOperation;

/**
 * {@code /actuator/gpupool}: what every device's memory pool holds, and the controls an operator needs
 * without a restart. Shaped like Boot's {@code loggers} (POST changes a setting) and {@code caches}
 * (DELETE empties):
 *
 * <pre>
 *  GET    /actuator/gpupool                    all devices
 *  GET    /actuator/gpupool/{device}           one device (404 if unknown)
 *  POST   /actuator/gpupool/{device}           tune: {"coalesceThreshold": 20, "localCacheBytesPerStream": "128MB"}
 *                                              graphs: {"graphsEnabled": true, "graphsMaxCount": 32, "graphsMaxBytes": "512MB"}
 *                                              (400 for a mode without a pool: BEST_FIT, DIRECT, CUDA_ASYNC)
 *  DELETE /actuator/gpupool                    trim every pool, answers the bytes released
 *  DELETE /actuator/gpupool/{device}           trim one pool
 *  GET    /actuator/gpupool/{device}/layout    buddy map: every chunk's blocks and their state
 *  GET    /actuator/gpupool/{device}/trace     the recorded allocation trace as CSV
 *  POST   /actuator/gpupool/{device}/trace     {"recording": true|false} starts or stops recording
 * </pre>
 *
 * The listing of all devices also holds {@code batching}: per model that batches, its policy and layout, the
 * requests waiting for a batch now, and since start the executions against the requests and rows they served
 * (mean batch size), tokens per execution, the queue delay and the requests that bypassed the queue.
 *
 * <p>Every device is listed whatever {@code gpupool.memory.mode} says: a mode without a pool shows its
 * allocator's byte totals, peaks, counters and latency (see {@link AllocatorAdapter}), so the memory of
 * the pool and of the baselines can be compared.
 *
 * <p>The operations here return plain values (null meaning "no such device"); the HTTP statuses and the
 * 400 answers that name a bad field live in {@link GpuPoolEndpointWebExtension}.
 */
@Endpoint(id = GpuPoolEndpoint.ID)
public class GpuPoolEndpoint {

    public static final String ID = "gpupool";

    public static final String LAYOUT = "layout";
    static final String TRACE = "trace";
    static final String ADDRESSES_RAW = "raw";
    static final String ADDRESSES_HIDDEN = "hidden";

    private final ManagedPools pools;
    private final ManagedGraphs graphs;
    private final ManagedBatching batching;

    public GpuPoolEndpoint(ManagedPools pools) {
        this(pools, ManagedGraphs.NONE);
    }

    public GpuPoolEndpoint(ManagedPools pools, ManagedGraphs graphs) {
        this(pools, graphs, ManagedBatching.NONE);
    }

    public GpuPoolEndpoint(ManagedPools pools, ManagedGraphs graphs, ManagedBatching batching) {
        this.pools = pools;
        this.graphs = graphs;
        this.batching = batching;
    }

    @ReadOperation
    public PoolsDescriptor pools() {
        Map<String, DeviceDescriptor> devices = new LinkedHashMap<>();
        for (ManagedPool pool : pools.all()) {
            devices.put(pool.device(), describe(pool, graphs));
        }
        Map<String, BatchingDescriptor> models = new LinkedHashMap<>();
        for (BatchingDescriptor model : batching.models()) {
            models.put(model.model(), model);
        }
        return new PoolsDescriptor(devices, models);
    }

    @ReadOperation
    public @Nullable DeviceDescriptor device(@Selector String device) {
        return pools.find(device).map(pool -> describe(pool, graphs)).orElse(null);
    }

    /**
     * Reads a section of one device: {@code layout} (JSON) or {@code trace} (CSV, streamed; pointers are
     * stand-ins for the device addresses unless {@code addresses=raw}).
     */
    @ReadOperation(produces = {"application/json", "text/csv"})   // as the web extension's, which then replaces it
    public @Nullable Object section(@Selector String device, @Selector String section, @Nullable String addresses) {
        ManagedPool pool = pools.find(device).orElse(null);
        if (pool == null) {
            return null;
        }
        return switch (section) {
            case LAYOUT -> new LayoutDescriptor(pool.device(), minBlockBytes(pool), pool.layout());
            case TRACE -> pool.trace().map(trace -> new TraceCsvResource(pool.device(), trace, rawAddresses(addresses)))
                    .orElse(null);
            default -> null;
        };
    }

    /** {@code addresses=raw} shows device addresses; absent or {@code hidden}, stand-ins. */
    static boolean rawAddresses(@Nullable String addresses) {
        if (addresses == null || addresses.equals(ADDRESSES_HIDDEN)) {
            return false;
        }
        if (addresses.equals(ADDRESSES_RAW)) {
            return true;
        }
        throw new IllegalArgumentException("addresses must be '" + ADDRESSES_RAW + "' or '" + ADDRESSES_HIDDEN + "'");
    }

    /**
     * Tunes one pool; absent fields stay as they are. The body's fields are {@link PoolTuning}'s
     * components, bound by {@link TuningBodyBinder} and {@link TuningRequest}.
     *
     * @return the configuration in force afterwards, or null if there is no such device
     * @throws TuningException naming the field that the pool rejects
     */
    @WriteOperation
    public @Nullable TunedDescriptor tune(@Selector String device, PoolTuning tuning, GraphTuning.Fields graphFields) {
        ManagedPool pool = pools.find(device).orElse(null);
        if (pool == null) {
            return null;
        }
        GraphCacheControl graphCache = graphs.find(device).orElse(null);
        GraphLimits graphLimits = null;
        if (graphFields.any()) {
            if (graphCache == null) {
                String field = graphFields.firstGiven();
                throw TuningException.ofField(field, String.valueOf(graphFields.value(field)),
                        "no graph fields: device " + device + " has no CUDA graphs");
            }
            graphLimits = GraphTuning.apply(graphCache.limits(), graphFields.enabled(), graphFields.maxCount(),
                    graphFields.maxBytes());
        }
        PoolConfig tuned = pool.configuration();
        if (graphLimits == null || !tuning.equals(PoolTuning.none())) {
            try {
                // An allocator without a pool configuration refuses whatever the fields say: its answer
                // names the mode.
                PoolConfig current = pool.configuration();
                if (current != null) {
                    TuningChecks.beforeApplying(current, tuning, pool.capacityBytes());
                }
                tuned = pool.tune(tuning);
            }
            catch (IllegalArgumentException ex) {
                throw TuningException.fromPool(ex);
            }
        }
        if (graphLimits != null) {
            graphCache.tune(graphLimits);
        }
        return new TunedDescriptor(pool.device(), pool.capBytes(), tuned, graphCache == null ? null : describe(graphCache));
    }

    /** Starts or stops trace recording; null if there is no such device or it records no trace. */
    @WriteOperation
    public @Nullable TraceDescriptor record(@Selector String device, @Selector String section, boolean recording) {
        if (!TRACE.equals(section)) {
            return null;
        }
        ManagedPool.TraceControl recorder = pools.find(device).flatMap(ManagedPool::trace).orElse(null);
        if (recorder == null) {
            return null;
        }
        if (recording) {
            recorder.start();
        }
        else {
            recorder.stop();
        }
        return new TraceDescriptor(device, recorder.recording(), recorder.events());
    }

    @DeleteOperation
    public TrimDescriptor trim() {
        Map<String, Long> released = new LinkedHashMap<>();
        long total = 0;
        for (ManagedPool pool : pools.all()) {
            long bytes = pool.trim();
            released.put(pool.device(), bytes);
            total += bytes;
        }
        return new TrimDescriptor(total, released);
    }

    @DeleteOperation
    public @Nullable TrimDescriptor trimDevice(@Selector String device) {
        return pools.find(device).map(pool -> {
            long bytes = pool.trim();
            return new TrimDescriptor(bytes, Map.of(pool.device(), bytes));
        }).orElse(null);
    }

    static @Nullable GraphsDescriptor describe(GraphCacheControl graphs) {
        GraphCacheMetrics m = graphs.metrics();
        return new GraphsDescriptor(m.enabled(), m.maxCount(), m.maxBytes(), m.graphs(), m.bytes(), m.hits(),
                m.misses(), m.captures(), m.captureFailures(), m.replayFailures(), m.evictions());
    }

    static DeviceDescriptor describe(ManagedPool pool, ManagedGraphs graphs) {
        PoolMetrics m = pool.metrics();
        List<ChunkMetric> chunks = m.chunks();
        GlobalDescriptor global = new GlobalDescriptor(m.reservedBytes(), m.allocatedBytes(), m.requestedBytes(),
                m.cachedBytes(), m.globalFreeBytes(), m.peakReservedBytes(), m.peakAllocatedBytes(), m.peakRequestedBytes(),
                m.largestFreeBlockBytes(), m.fragmentation(), m.freeBlocks(), chunks.size(), chunks,
                m.addressSpaceBytes(), m.mapCalls(), m.unmapCalls(), m.crossStreamWaits(), m.mapNanos(), m.unmapNanos(),
                m.physicalCreates(), m.physicalReleases(), m.retainedHandles(), m.retainedHandleBytes());
        List<LocalCacheDescriptor> caches = m.streams().stream()
                .map(c -> new LocalCacheDescriptor(c.ordinal(), c.cachedBytes(), c.cachedBlocks(), c.hits(), c.misses(),
                        c.hitRatio()))
                .toList();
        LatencyDistribution l = m.allocationLatency();
        LatencyDescriptor latency = new LatencyDescriptor(l.count(), l.percentileNanos(0.5), l.percentileNanos(0.9),
                l.percentileNanos(0.99), l.percentileNanos(0.999), l.percentileNanos(1.0));
        TraceDescriptor trace = pool.trace()
                .map(t -> new TraceDescriptor(pool.device(), t.recording(), t.events()))
                .orElse(null);
        return new DeviceDescriptor(pool.device(), m.mode().name(), pool.capacityBytes(), pool.capBytes(), global,
                m.smallClasses(), m.localCacheCapBytes(), caches, m.counters(), latency, pool.configuration(), trace,
                graphs.find(pool.device()).map(GpuPoolEndpoint::describe).orElse(null),
                pool.kernels(), describe(pool.admission()));
    }

    static @Nullable AdmissionDescriptor describe(@Nullable AdmissionMetrics a) {
        if (a == null) {
            return null;
        }
        LatencyDistribution wait = a.waitTime();
        return new AdmissionDescriptor(a.enabled(), a.waiting(), a.waitingBytes(), a.running(), a.admittedBytes(),
                a.ceilingBytes(), a.limitBytes(), a.residentBytes(), a.admittedCount(), a.waitedCount(), a.refusedCount(),
                a.abandonedCount(), a.aloneCount(), wait.percentileNanos(0.5), wait.percentileNanos(0.99), wait.percentileNanos(1.0));
    }

    /** The buddy tree's leaf size, for drawing the layout; 0 for an allocator without a pool. */
    private static long minBlockBytes(ManagedPool pool) {
        PoolConfig config = pool.configuration();
        return config == null ? 0 : config.minBlockBytes();
    }

    /** All devices, keyed by device selector, and the batching of each model that batches, keyed by model name. */
    public record PoolsDescriptor(Map<String, DeviceDescriptor> devices, Map<String, BatchingDescriptor> batching) {
    }

    /**
     * One model's dynamic batching. The policy in force ({@code maxQueueDelayMicros}, {@code maxRequests},
     * {@code maxTokens}, {@code preferredBatchSizes}, as the model's {@code dynamic_batching} and
     * {@code gpupool.batching.*} resolve them) and the {@code layout} of a batched forward ({@code packed} or
     * {@code padded}); {@code waiting}: requests waiting for a batch now, in all and per device selector.
     * Since start: {@code executions} (forwards, batched or not: Triton's execution_count), the {@code requests},
     * batch rows ({@code inferences}: Triton's inference_count) and {@code tokens} they carried, and the means per
     * execution; {@code bypassed}: requests that filled a batch alone and ran at once outside the queue (counted
     * with their execution, not in the queue delay; one refused with 503 never ran and is not counted); {@code splitsForMemory}: batches closed early because one more
     * request would have passed the pool's cap; {@code cancelledWhileWaiting}: requests that left the queue
     * (cancelled, timed out) before their batch ran; {@code phases}: where a batched execution's time went. The
     * counters are read one by one, not at one instant.
     */
    public record BatchingDescriptor(String model, String version, String layout, long maxQueueDelayMicros,
                                     int maxRequests, int maxTokens, List<Integer> preferredBatchSizes, int waiting,
                                     Map<String, Integer> waitingByDevice, long executions, long requests,
                                     long inferences, long tokens, double meanRequestsPerExecution,
                                     double meanRowsPerExecution, double meanTokensPerExecution, long bypassed,
                                     long splitsForMemory, long cancelledWhileWaiting, QueueDelayDescriptor queueDelay,
                                     PhasesDescriptor phases) {
    }

    /**
     * Means since start, in nanoseconds, over the batched executions ({@code forwards}) and their members
     * ({@code answers}): {@code meanForwardNanos}, how long a batch held its stream (inputs staged, forward enqueued
     * and synchronised, outputs sliced); {@code meanAnswerWaitNanos}, how long a member then waited for the answering
     * executor; {@code meanEncodeNanos}, how long its response took to encode.
     */
    public record PhasesDescriptor(long forwards, long meanForwardNanos, long answers, long meanAnswerWaitNanos,
                                   long meanEncodeNanos) {
    }

    /**
     * How long the queued requests waited for their batch to start: {@code samples} requests, their mean, and
     * percentiles as upper bounds of power-of-two buckets (exact to a factor of two), in nanoseconds.
     */
    public record QueueDelayDescriptor(long samples, long meanNanos, long p50Nanos, long p90Nanos, long p99Nanos,
                                       long maxNanos) {
    }

    /**
     * One device's pool, or its allocator when the mode has no pool ({@code mode} BEST_FIT, DIRECT,
     * CUDA_ASYNC: then {@code configuration} is null, the cap is the device memory, and only the byte
     * totals, peaks, counters and latency of {@code global} are filled). {@code capBytes} is the cap in
     * force resolved against the device memory; {@code localCacheCapBytes} is each stream's local cap in
     * force now (the configured cap, lowered to a share of the allocated bytes under MAPPED and ON_DEMAND
     * growth; 0 without local caches); {@code trace} is null when the pool is not wrapped by the trace
     * recorder; {@code graphs} is null on a device without CUDA graphs; {@code kernels} names the GEMM engine and
     * the activation type of the device's kernels (null where unknown).
     */
    public record DeviceDescriptor(String device, String mode, long capacityBytes, long capBytes,
                                   GlobalDescriptor global, List<SizeClassMetric> smallObjects,
                                   long localCacheCapBytes, List<LocalCacheDescriptor> localCaches,
                                   AllocatorCounters counters,
                                   LatencyDescriptor latency, @Nullable PoolConfig configuration,
                                   @Nullable TraceDescriptor trace, @Nullable GraphsDescriptor graphs,
                                   ManagedPool.@Nullable Kernels kernels, @Nullable AdmissionDescriptor admission) {
    }

    /**
     * A device's memory admission ({@code gpupool.memory.admission.enabled}): requests reserve their planned
     * activation peak under {@code ceilingBytes} (the cap less {@code residentBytes}, memory that belongs to no
     * request) before they run, and under {@code limitBytes} (the ceiling, lowered for a while after admitted
     * requests ran out of memory below it). Now: {@code waiting} requests of {@code waitingBytes} wait, {@code running} of
     * {@code admittedBytes} are admitted. Since start: {@code admitted} requests, {@code waited} of them after
     * waiting, {@code refused} at once with 507 (their peak alone exceeds the ceiling), {@code abandoned} while
     * waiting (timeout, disconnect), {@code ranAlone} ran again alone after running out of memory beside
     * others (their plans underestimated); the wait of admitted requests at p50, p99 and its maximum (upper bounds of
     * power-of-two buckets). Null on a device without one.
     */
    public record AdmissionDescriptor(boolean enabled, int waiting, long waitingBytes, int running, long admittedBytes,
                                      long ceilingBytes, long limitBytes, long residentBytes, long admitted, long waited, long refused,
                                      long abandoned, long ranAlone, long waitP50Nanos, long waitP99Nanos, long waitMaxNanos) {
    }

    /**
     * A device's CUDA graph cache: the limits in force ({@code gpupool.kernels.graphs.*}, tuned as
     * {@code graphsEnabled}, {@code graphsMaxCount}, {@code graphsMaxBytes}), the graphs and pool bytes
     * cached now, and since start the replays (hits), bucketed requests that ran eagerly (misses),
     * graphs captured, {@code captureFailures} (a shape whose capture failed: answered eagerly, retried after
     * many more misses, given up after a few attempts), {@code replayFailures} (a cached graph that failed its replay:
     * dropped, answered eagerly), and evictions. Prometheus has both as {@code gpupool_graphs_failures_total} with
     * {@code stage="capture"} or {@code stage="replay"}.
     */
    public record GraphsDescriptor(boolean enabled, int maxCount, long maxBytes, int graphs, long bytes, long hits,
                                   long misses, long captures, long captureFailures, long replayFailures,
                                   long evictions) {
    }

    /**
     * The global (buddy) level. {@code freeBytes} is what its free lists hold; fragmentation is
     * 1 - largest free block / free bytes. {@code cachedBytes} is held by the local caches, not here.
     * Under MAPPED growth reserved bytes are mapped memory, {@code addressSpaceBytes} the address space
     * the chunks span, and the map / unmap counters the driver calls that moved memory.
     * {@code crossStreamWaits} counts device-side waits on other streams' fences (memory reused across streams).
     * {@code mapNanos} / {@code unmapNanos}: host time spent in those map / unmap calls.
     * {@code physicalCreates} / {@code physicalReleases}: the driver's physical allocations made and let go
     * (cuMemCreate / cuMemRelease); {@code retainedHandles} / {@code retainedHandleBytes}: those unmapped but
     * kept to map again ({@code gpupool.memory.retained-handle-bytes}; counted in reserved bytes).
     * {@code peakRequestedBytes}: the most bytes the callers had asked for at once; peak allocated over it
     * is the rounding of the pool.
     */
    public record GlobalDescriptor(long reservedBytes, long allocatedBytes, long requestedBytes, long cachedBytes,
                                   long freeBytes, long peakReservedBytes, long peakAllocatedBytes, long peakRequestedBytes,
                                   long largestFreeBlockBytes, double fragmentation, List<FreeOrderMetric> freeBlocks,
                                   int chunkCount, List<ChunkMetric> chunks, long addressSpaceBytes, long mapCalls,
                                   long unmapCalls, long crossStreamWaits, long mapNanos, long unmapNanos,
                                   long physicalCreates, long physicalReleases, long retainedHandles,
                                   long retainedHandleBytes) {
    }

    /** A stream's local cache; hitRatio = hits / (hits + misses). */
    public record LocalCacheDescriptor(int stream, long bytes, long blocks, long hits, long misses, double hitRatio) {
    }

    /** Allocation latency percentiles in nanoseconds (upper bounds of power-of-two buckets). */
    public record LatencyDescriptor(long samples, long p50Nanos, long p90Nanos, long p99Nanos, long p999Nanos,
                                    long maxNanos) {
    }

    public record LayoutDescriptor(String device, long minBlockBytes, List<ManagedPool.ChunkLayout> chunks) {
    }

    public record TunedDescriptor(String device, long capBytes, @Nullable PoolConfig configuration,
                                  @Nullable GraphsDescriptor graphs) {
    }

    public record TrimDescriptor(long releasedBytes, Map<String, Long> devices) {
    }

    public record TraceDescriptor(String device, boolean recording, long events) {
    }
}
