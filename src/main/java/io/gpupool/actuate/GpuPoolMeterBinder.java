package io.gpupool.actuate;

import java.util.List;
import java.util.Objects;
import java.util.concurrent.TimeUnit;
import java.util.function.ToDoubleFunction;
import java.util.function.ToLongFunction;

import io.gpupool.memory.PoolConfig;
import io.gpupool.memory.metric.AdmissionMetrics;
import io.gpupool.memory.metric.FreeOrderMetric;
import io.gpupool.memory.metric.LatencyDistribution;
import io.gpupool.memory.metric.PoolMetrics;
import io.gpupool.model.graph.GraphCacheMetrics;
import io.micrometer.core.instrument.binder.BaseUnits;
import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.FunctionTimer;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Tags;
import io.micrometer.core.instrument.binder.MeterBinder;

/**
 * Binds every device's pool to Micrometer: the one place where the core's read-only statistics
 * ({@code memory.metric.PoolMetrics}) become meters. Each meter reads the pool when it is scraped
 * (gauges and function counters keep a reference to the pool, nothing is copied in between), so a
 * runtime tuning shows at the next scrape. Reads never take the pool's allocation lock.
 *
 * <p>Names are dot-separated (Prometheus renders {@code gpupool.memory.reserved} with base unit bytes
 * as {@code gpupool_memory_reserved_bytes}); every meter has a description and, where it has one,
 * a base unit; tags are {@code device} and, where it applies, {@code level} ({@code global} for the
 * buddy level, {@code local} for the per-stream caches). A device whose mode has no pool (BEST_FIT,
 * DIRECT, CUDA_ASYNC) gets the same meters, with the pool-only ones at 0, except the tunables, which it
 * does not have.
 *
 * <h2>Allocation latency</h2>
 * The core keeps its own lock-free power-of-two histogram (no Micrometer in {@code memory}), so it is
 * exported as what it is: cumulative bucket counters {@code gpupool.allocation.latency.buckets}
 * with an {@code le} tag in seconds (Prometheus' {@code histogram_quantile} works on them and they
 * add up across replicas), the sample count, and one gauge per quantile for quick reading.
 */
public class GpuPoolMeterBinder implements MeterBinder {

    /** Quantiles exported as gauges. */
    static final double[] QUANTILES = {0.5, 0.9, 0.99, 0.999};
    /** Buckets exported: upper bounds 2^(i+1) ns for i in [FIRST, LAST], i.e. 128 ns .. 134 ms, then +Inf. */
    static final int FIRST_BUCKET = 6;
    static final int LAST_BUCKET = 26;

    private final ManagedPools pools;
    private final ManagedGraphs graphs;

    public GpuPoolMeterBinder(ManagedPools pools) {
        this(pools, ManagedGraphs.NONE);
    }

    public GpuPoolMeterBinder(ManagedPools pools, ManagedGraphs graphs) {
        this.pools = pools;
        this.graphs = graphs;
    }

    @Override
    public void bindTo(MeterRegistry registry) {
        for (ManagedPool pool : pools.all()) {
            bind(pool, registry);
            AdmissionMetrics admission = pool.admission();
            if (admission != null) {
                bindAdmission(Tags.of("device", pool.device()), admission, registry);
            }
        }
        graphs.all().forEach((device, cache) -> bindGraphs(device, cache.metrics(), registry));
    }

    /**
     * A device's memory admission: {@code gpupool.memory.admission.*}, tagged with the device. The wait is a
     * function timer over every admitted request (those admitted at once count with their few nanoseconds),
     * plus quantile gauges of the power-of-two wait histogram.
     */
    private static void bindAdmission(Tags tags, AdmissionMetrics a, MeterRegistry registry) {
        Gauge.builder("gpupool.memory.admission.waiting", a, AdmissionMetrics::waiting)
                .description("Requests waiting for their planned memory under the pool's cap").baseUnit("requests")
                .tags(tags).register(registry);
        Gauge.builder("gpupool.memory.admission.waiting.bytes", a, AdmissionMetrics::waitingBytes)
                .description("Planned activation bytes of the requests waiting for memory").baseUnit(BaseUnits.BYTES)
                .tags(tags).register(registry);
        Gauge.builder("gpupool.memory.admission.running", a, AdmissionMetrics::running)
                .description("Requests admitted under the cap and not finished").baseUnit("requests")
                .tags(tags).register(registry);
        Gauge.builder("gpupool.memory.admission.admitted.bytes", a, AdmissionMetrics::admittedBytes)
                .description("Planned activation bytes of the admitted, unfinished requests").baseUnit(BaseUnits.BYTES)
                .tags(tags).register(registry);
        Gauge.builder("gpupool.memory.admission.ceiling", a, AdmissionMetrics::ceilingBytes)
                .description("Most planned bytes admitted requests may hold together: the cap less resident memory")
                .baseUnit(BaseUnits.BYTES).tags(tags).register(registry);
        Gauge.builder("gpupool.memory.admission.limit", a, AdmissionMetrics::limitBytes)
                .description("Bound applied now: the ceiling, lowered after admitted requests ran out of memory below it")
                .baseUnit(BaseUnits.BYTES).tags(tags).register(registry);
        Gauge.builder("gpupool.memory.admission.resident", a, AdmissionMetrics::residentBytes)
                .description("Pool memory that belongs to no request (workspaces, graph pools), as last sampled")
                .baseUnit(BaseUnits.BYTES).tags(tags).register(registry);
        FunctionCounter.builder("gpupool.memory.admission.admitted", a, AdmissionMetrics::admittedCount)
                .description("Requests admitted under the cap, at once or after waiting").tags(tags).register(registry);
        FunctionCounter.builder("gpupool.memory.admission.waited", a, AdmissionMetrics::waitedCount)
                .description("Requests admitted after waiting for memory").tags(tags).register(registry);
        FunctionCounter.builder("gpupool.memory.admission.refused", a, AdmissionMetrics::refusedCount)
                .description("Requests refused at once with 507: their planned peak alone exceeds what the cap can give")
                .tags(tags).register(registry);
        FunctionCounter.builder("gpupool.memory.admission.abandoned", a, AdmissionMetrics::abandonedCount)
                .description("Requests that left the memory queue before admission (timeout, disconnect)")
                .tags(tags).register(registry);
        FunctionCounter.builder("gpupool.memory.admission.alone", a, AdmissionMetrics::aloneCount)
                .description("Requests that ran out of memory beside others and ran again alone (plans that underestimate)")
                .tags(tags).register(registry);
        FunctionTimer.builder("gpupool.memory.admission.wait", a, AdmissionMetrics::admittedCount,
                        AdmissionMetrics::waitNanos, TimeUnit.NANOSECONDS)
                .description("Time admitted requests waited for their planned memory").tags(tags).register(registry);
        for (double q : QUANTILES) {
            Gauge.builder("gpupool.memory.admission.wait.quantile", a, m -> m.waitTime().percentileNanos(q) / 1e9)
                    .description("Wait for memory at a quantile (upper bound of its power-of-two bucket)")
                    .baseUnit("seconds").tags(tags.and("quantile", Double.toString(q))).register(registry);
        }
    }

    /** A device's CUDA graph cache: {@code gpupool.graphs.*}, tagged with the device. */
    private static void bindGraphs(String device, GraphCacheMetrics m, MeterRegistry registry) {
        Tags tags = Tags.of("device", device);
        Gauge.builder("gpupool.graphs.cached", m, GraphCacheMetrics::graphs)
                .description("CUDA graphs cached (one per model and shape bucket)").tags(tags).register(registry);
        Gauge.builder("gpupool.graphs.memory", m, GraphCacheMetrics::bytes).baseUnit(BaseUnits.BYTES)
                .description("Pool memory the cached graphs' activations hold").tags(tags).register(registry);
        Gauge.builder("gpupool.graphs.memory.max", m, GraphCacheMetrics::maxBytes).baseUnit(BaseUnits.BYTES)
                .description("Most pool memory the graph cache may hold (tunable)").tags(tags).register(registry);
        FunctionCounter.builder("gpupool.graphs.hits", m, GraphCacheMetrics::hits)
                .description("Requests served by replaying a graph").tags(tags).register(registry);
        FunctionCounter.builder("gpupool.graphs.misses", m, GraphCacheMetrics::misses)
                .description("Requests in a bucketed shape that ran eagerly (no graph yet, or it was busy)")
                .tags(tags).register(registry);
        FunctionCounter.builder("gpupool.graphs.captures", m, GraphCacheMetrics::captures)
                .description("Graphs captured and cached").tags(tags).register(registry);
        // One name, the stage as a tag: sum by device for every failure, or tell a shape that never captures
        // from a graph that stopped replaying.
        FunctionCounter.builder("gpupool.graphs.failures", m, GraphCacheMetrics::captureFailures)
                .description("Failed graph captures and replays (each answered eagerly), by stage")
                .tags(tags.and("stage", "capture")).register(registry);
        FunctionCounter.builder("gpupool.graphs.failures", m, GraphCacheMetrics::replayFailures)
                .description("Failed graph captures and replays (each answered eagerly), by stage")
                .tags(tags.and("stage", "replay")).register(registry);
        FunctionCounter.builder("gpupool.graphs.evictions", m, GraphCacheMetrics::evictions)
                .description("Graphs freed to make room, on tuning or on model unload").tags(tags).register(registry);
    }

    private void bind(ManagedPool pool, MeterRegistry registry) {
        Tags device = Tags.of("device", pool.device());
        Tags global = device.and("level", "global");
        Tags local = device.and("level", "local");

        bytes(registry, "gpupool.memory.reserved", "Device memory the pool holds (chunks obtained from the device)",
                global, pool, p -> p.metrics().reservedBytes());
        bytes(registry, "gpupool.memory.allocated", "Memory handed out in blocks, after rounding", global, pool,
                p -> p.metrics().allocatedBytes());
        bytes(registry, "gpupool.memory.requested", "Memory the callers asked for, before rounding", global, pool,
                p -> p.metrics().requestedBytes());
        bytes(registry, "gpupool.memory.cached", "Free memory held in the streams' local caches", local, pool,
                p -> p.metrics().cachedBytes());
        bytes(registry, "gpupool.memory.free", "Free memory in the global level's free lists", global, pool,
                p -> p.metrics().globalFreeBytes());
        bytes(registry, "gpupool.memory.peak.reserved", "Highest reserved since start or the last peak reset",
                global, pool, p -> p.metrics().peakReservedBytes());
        bytes(registry, "gpupool.memory.peak.allocated", "Highest allocated since start or the last peak reset",
                global, pool, p -> p.metrics().peakAllocatedBytes());
        bytes(registry, "gpupool.memory.peak.requested", "Highest requested (before rounding) since start or the last peak reset",
                global, pool, p -> p.metrics().peakRequestedBytes());
        bytes(registry, "gpupool.memory.address.space", "Address space the pool's chunks span (MAPPED growth; 0 otherwise)",
                global, pool, p -> p.metrics().addressSpaceBytes());
        bytes(registry, "gpupool.memory.retained", "Physical memory unmapped but kept to map again, counted in "
                + "reserved (MAPPED growth with retained handles)", global, pool, p -> p.metrics().retainedHandleBytes());
        Gauge.builder("gpupool.retained.handles", pool, p -> p.metrics().retainedHandles())
                .description("Physical allocations unmapped but kept to map again (MAPPED growth)")
                .tags(global).register(registry);
        bytes(registry, "gpupool.memory.capacity", "Memory of the device behind the pool", device, pool,
                ManagedPool::capacityBytes);
        bytes(registry, "gpupool.memory.cap", "Most the pool may reserve from the device (tunable)", global, pool,
                ManagedPool::capBytes);
        bytes(registry, "gpupool.free.largest", "Largest free block of the global level", global, pool,
                p -> p.metrics().largestFreeBlockBytes());
        Gauge.builder("gpupool.fragmentation", pool, p -> p.metrics().fragmentation())
                .description("1 - largest free block / free memory of the global level (0 = none)")
                .tags(global).register(registry);
        bytes(registry, "gpupool.local.cache.cap.in.force", "Cap on each stream's local cache now: the configured cap, "
                + "lowered to a stream's share of the allocated bytes under MAPPED and ON_DEMAND growth", local, pool,
                p -> p.metrics().localCacheCapBytes());
        Gauge.builder("gpupool.chunks", pool, p -> p.metrics().chunks().size())
                .description("Chunks the pool holds from the device").tags(global).register(registry);
        if (pool.kernels() != null) {
            bytes(registry, "gpupool.memory.workspace", "Of the allocated bytes, the kernels' per-stream library "
                    + "workspaces (given back when the device is idle or trimmed)", global, pool,
                    p -> p.kernels().workspaces().bytes());
            bytes(registry, "gpupool.memory.workspace.captured", "Of the workspace bytes, those pinned because a CUDA "
                    + "graph captured their address", global, pool, p -> p.kernels().workspaces().capturedBytes());
        }
        if (pool.configuration() != null) {
            // The tunables exist only for a pool; an allocator without one (BEST_FIT, DIRECT, CUDA_ASYNC)
            // has none to show, and its configuration never appears later (the mode is fixed at start).
            bytes(registry, "gpupool.local.cache.cap", "Cap on each stream's local cache (tunable)", local, pool,
                    p -> tunable(p).localCacheBytesPerStream());
            bytes(registry, "gpupool.growth.step", "Size of the first lazily grown chunk (tunable)", global, pool,
                    p -> tunable(p).growthStepBytes());
            Gauge.builder("gpupool.coalesce.threshold", pool, p -> tunable(p).coalesceThreshold())
                    .description("Free blocks of one order that trigger a deferred merge (tunable)").tags(global)
                    .register(registry);
            Gauge.builder("gpupool.mapped.slack", pool, p -> tunable(p).mappedSlack())
                    .description("MAPPED growth: free mapped memory kept beyond the allocated high-water mark, "
                            + "as a fraction of it (tunable)").tags(global).register(registry);
            Gauge.builder("gpupool.wait.beyond.budget", pool, p -> tunable(p).waitBeyondBudget() ? 1 : 0)
                    .description("MAPPED growth: 1 when a stream waits for memory another stream freed rather than "
                            + "map beyond the budget (tunable)").tags(global).register(registry);
            Gauge.builder("gpupool.budget.reclaim.periodic", pool,
                            p -> tunable(p).budgetReclaim() == io.gpupool.memory.BudgetReclaim.PERIODIC ? 1 : 0)
                    .description("MAPPED growth: 1 when maintenance, not the allocation, unmaps free mapped memory "
                            + "above the budget (tunable)").tags(global).register(registry);
        }
        for (FreeOrderMetric order : pool.metrics().freeBlocks()) {
            int k = order.order();
            Gauge.builder("gpupool.free.blocks", pool, p -> freeBlocks(p.metrics(), k))
                    .description("Free blocks of the global level, by block size")
                    .tags(global.and("block.size", Long.toString(order.blockBytes()))).register(registry);
        }
        Gauge.builder("gpupool.local.hit.ratio", pool, p -> localHitRatio(p.metrics()))
                .description("Share of allocations served by the stream's local cache, since start")
                .tags(local).register(registry);

        counter(registry, "gpupool.allocations", "Blocks handed out", device, pool,
                p -> p.metrics().counters().allocations());
        counter(registry, "gpupool.frees", "Blocks returned", device, pool, p -> p.metrics().counters().frees());
        counter(registry, "gpupool.hits", "Allocations served at this level without growing", local, pool,
                p -> p.metrics().counters().localHits());
        counter(registry, "gpupool.hits", "Allocations served at this level without growing", global, pool,
                p -> p.metrics().counters().globalHits());
        counter(registry, "gpupool.grows", "Chunks obtained from the device", global, pool,
                p -> p.metrics().counters().grows());
        counter(registry, "gpupool.trims", "Chunks returned to the device and local caches flushed", device, pool,
                p -> p.metrics().counters().trims());
        counter(registry, "gpupool.maps", "Calls that mapped device memory into the pool's address space (MAPPED growth)",
                global, pool, p -> p.metrics().mapCalls());
        counter(registry, "gpupool.unmaps", "Calls that unmapped free device memory (MAPPED growth)", global, pool,
                p -> p.metrics().unmapCalls());
        counter(registry, "gpupool.physical.creates", "Physical allocations created for mapping (cuMemCreate; MAPPED growth)",
                global, pool, p -> p.metrics().physicalCreates());
        counter(registry, "gpupool.physical.releases", "Physical allocations released (cuMemRelease; MAPPED growth)",
                global, pool, p -> p.metrics().physicalReleases());
        timer(registry, "gpupool.map.time", "Host time in the calls that mapped device memory (MAPPED growth)", global,
                pool, p -> p.metrics().mapCalls(), p -> p.metrics().mapNanos());
        timer(registry, "gpupool.unmap.time", "Host time in the calls that unmapped free device memory (MAPPED growth)",
                global, pool, p -> p.metrics().unmapCalls(), p -> p.metrics().unmapNanos());
        counter(registry, "gpupool.fence.waits", "Device-side waits on other streams' fences (memory reused across streams)",
                global, pool, p -> p.metrics().crossStreamWaits());
        counter(registry, "gpupool.coalesces", "Buddy merges of the global level", global, pool,
                p -> p.metrics().counters().coalesces());
        counter(registry, "gpupool.recoveries", "Staged out-of-memory recoveries started", device, pool,
                p -> p.metrics().counters().recoveries());
        counter(registry, "gpupool.failures", "Allocations that failed after recovery", device, pool,
                p -> p.metrics().counters().failures());

        counter(registry, "gpupool.allocation.latency.samples", "Allocation latency samples recorded by the pool",
                device, pool, p -> p.metrics().allocationLatency().count());
        for (int i = FIRST_BUCKET; i <= LAST_BUCKET + 1; i++) {
            int upTo = i;
            String le = i > LAST_BUCKET ? "+Inf"
                    : Double.toString(LatencyDistribution.bucketUpperBoundNanos(i) / 1e9);
            counter(registry, "gpupool.allocation.latency.buckets",
                    "Allocation latency samples at or below le seconds (cumulative, power-of-two buckets)",
                    device.and("le", le), pool, p -> cumulative(p.metrics().allocationLatency(), upTo));
        }
        for (double q : QUANTILES) {
            Gauge.builder("gpupool.allocation.latency.quantile", pool,
                            p -> p.metrics().allocationLatency().percentileNanos(q) / 1e9)
                    .description("Allocation latency at a quantile (upper bound of its power-of-two bucket)")
                    .baseUnit("seconds").tags(device.and("quantile", Double.toString(q)))
                    .register(registry);
        }
    }

    private static void bytes(MeterRegistry registry, String name, String description, Tags tags, ManagedPool pool,
                              ToDoubleFunction<ManagedPool> value) {
        Gauge.builder(name, pool, value).description(description).baseUnit(BaseUnits.BYTES).tags(tags)
                .register(registry);
    }

    private static void counter(MeterRegistry registry, String name, String description, Tags tags,
                                ManagedPool pool, ToDoubleFunction<ManagedPool> value) {
        FunctionCounter.builder(name, pool, value).description(description).tags(tags).register(registry);
    }

    private static void timer(MeterRegistry registry, String name, String description, Tags tags, ManagedPool pool,
                              ToLongFunction<ManagedPool> count, ToDoubleFunction<ManagedPool> totalNanos) {
        FunctionTimer.builder(name, pool, count, totalNanos, TimeUnit.NANOSECONDS).description(description).tags(tags)
                .register(registry);
    }

    /** The configuration of a pool that had one when it was bound (a pool never loses it). */
    private static PoolConfig tunable(ManagedPool pool) {
        return Objects.requireNonNull(pool.configuration(), "configuration");
    }

    private static double freeBlocks(PoolMetrics metrics, int order) {
        List<FreeOrderMetric> orders = metrics.freeBlocks();
        for (FreeOrderMetric o : orders) {
            if (o.order() == order) {
                return o.freeBlocks();
            }
        }
        return 0;
    }

    /** Local hits / allocations since start; 0 before the first allocation. */
    static double localHitRatio(PoolMetrics metrics) {
        long allocations = metrics.counters().allocations();
        return allocations == 0 ? 0.0 : (double) metrics.counters().localHits() / allocations;
    }

    /** Samples in buckets 0..upTo (all of them when upTo is past the last exported bucket). */
    static double cumulative(LatencyDistribution latency, int upTo) {
        long[] counts = latency.bucketCounts();
        int last = upTo > LAST_BUCKET ? counts.length - 1 : Math.min(upTo, counts.length - 1);
        long sum = 0;
        for (int i = 0; i <= last; i++) {
            sum += counts[i];
        }
        return sum;
    }
}
