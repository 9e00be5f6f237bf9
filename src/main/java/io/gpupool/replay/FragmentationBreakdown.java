package io.gpupool.replay;

import io.gpupool.memory.trace.Trace;

import io.gpupool.memory.AllocationStream;
import io.gpupool.memory.DeviceAllocator;
import io.gpupool.memory.DeviceBlock;
import io.gpupool.memory.metric.ChunkMetric;
import io.gpupool.memory.metric.PoolMetrics;
import io.gpupool.memory.metric.SizeClassMetric;
import io.gpupool.replay.SimulatedChunkSource;
import io.gpupool.replay.StatisticsChunkSource;

import java.util.HashMap;
import java.util.Locale;

/**
 * Where the bytes reserved beyond live bytes sit at the moment the pool's reservation peaks: the
 * per-cause breakdown behind the fragmentation ratio of {@link TraceReplayer}.
 *
 * <h2>The identity it splits</h2>
 * <pre>
 *   reserved = live requested                 what the program asked for
 *            + rounding                       allocated (class / 2 MiB / chunk size) - requested
 *            + local caches                   free blocks and objects held by stream-local caches
 *            + free small-object slab space   free objects inside slabs of the global small level
 *            + buddy free in chunks with live blocks   (chunk-level fragmentation, growth overshoot)
 *            + buddy free in empty chunks               (chunks the pool keeps though unused)
 *                of both buddy lines: fenced            free memory whose last user's work is not yet
 *                                                       known done: another stream takes it only by
 *                                                       waiting, a reclaim may not unmap it
 *            + idle dedicated chunks          freed &gt; maxBlock chunks waiting for reuse
 *            + rest                           anything the metrics do not explain (should be ~0)
 * </pre>
 * Under MAPPED growth "reserved" and every buddy line count mapped memory only. Steps: replay the
 * trace like {@link TraceReplayer}, with the fences completing as a {@link FenceTiming} says; after
 * every allocation whose reservation passed the previous peak, take the breakdown from the
 * allocator's metrics; print the last one. Single-threaded, so the metrics describe one moment exactly.
 */
public final class FragmentationBreakdown {

    /** The split of reserved bytes at one moment; every field in bytes. */
    public record Breakdown(long reserved, long live, long rounding, long localCaches, long slabFree,
                            long buddyFreeInUsedChunks, long buddyFreeInEmptyChunks, long fencedFree, long idleDedicated,
                            int buddyChunks, int dedicatedChunks, double localHitRate, long sourceAllocations) {

        public long rest() {
            return reserved - live - rounding - localCaches - slabFree - buddyFreeInUsedChunks
                    - buddyFreeInEmptyChunks - idleDedicated;
        }

        /** One line per cause, each also as a fraction of {@code peakLive}. */
        public String describe(long peakLive) {
            StringBuilder out = new StringBuilder();
            line(out, "reserved at its peak", reserved, peakLive);
            line(out, "  live requested", live, peakLive);
            line(out, "  rounding (class, 2 MiB, chunk)", rounding, peakLive);
            line(out, "  local caches", localCaches, peakLive);
            line(out, "  free space in small-object slabs", slabFree, peakLive);
            line(out, "  buddy free in chunks with live blocks", buddyFreeInUsedChunks, peakLive);
            line(out, "  buddy free in empty chunks", buddyFreeInEmptyChunks, peakLive);
            line(out, "    of the buddy free: fenced (pending)", fencedFree, peakLive);
            line(out, "  idle dedicated chunks", idleDedicated, peakLive);
            line(out, "  rest", rest(), peakLive);
            out.append(String.format(Locale.ROOT, "  chunks at the peak: %d buddy, %d dedicated%n", buddyChunks, dedicatedChunks));
            out.append(String.format(Locale.ROOT, "  whole replay: %d source allocations (chunks + maps), local hit rate %.3f%n",
                    sourceAllocations, localHitRate));
            return out.toString();
        }

        private static void line(StringBuilder out, String what, long bytes, long peakLive) {
            out.append(String.format(Locale.ROOT, "%-42s %9.1f MiB  %6.3f x peak live%n", what,
                    bytes / 1048576.0, (double) bytes / peakLive));
        }
    }

    private FragmentationBreakdown() {
    }

    /** The breakdown of {@code metrics} now, with {@code live} requested bytes live. */
    public static Breakdown take(PoolMetrics metrics, long live) {
        long slabFree = 0;
        for (SizeClassMetric c : metrics.smallClasses()) {
            slabFree += c.freeObjects() * c.objectBytes();
        }
        long usedFree = 0;
        long emptyFree = 0;
        long idleDedicated = 0;
        int buddyChunks = 0;
        int dedicatedChunks = 0;
        for (ChunkMetric chunk : metrics.chunks()) {
            if (chunk.dedicated()) {
                dedicatedChunks++;
                idleDedicated += chunk.freeBytes();
            } else {
                buddyChunks++;
                if (chunk.freeBytes() == chunk.bytes()) {
                    emptyFree += chunk.freeBytes();
                } else {
                    usedFree += chunk.freeBytes();
                }
            }
        }
        return new Breakdown(metrics.reservedBytes(), live, metrics.allocatedBytes() - live, metrics.cachedBytes(),
                slabFree, usedFree, emptyFree, metrics.fencedFreeBytes(), idleDedicated, buddyChunks, dedicatedChunks, Double.NaN, -1);
    }

    /** Replays {@code trace} against {@code strategy} and returns the breakdown at the reservation's peak; fences complete at once. */
    public static Breakdown atPeak(Trace trace, TraceReplayer.Strategy strategy, long capacityBytes) {
        return atPeak(trace, strategy, capacityBytes, FenceTiming.IMMEDIATE);
    }

    /** Like {@link #atPeak(Trace, TraceReplayer.Strategy, long)}, the fences completing as {@code timing} says. */
    public static Breakdown atPeak(Trace trace, TraceReplayer.Strategy strategy, long capacityBytes, FenceTiming timing) {
        StatisticsChunkSource source = new StatisticsChunkSource(SimulatedChunkSource.withMapping("breakdown", capacityBytes));
        DeviceAllocator allocator = strategy.factory().apply(source);
        HashMap<Integer, AllocationStream> streams = new HashMap<>();
        HashMap<Long, DeviceBlock> live = new HashMap<>();
        long liveBytes = 0;
        long peakReserved = -1;
        long[] clock = {0};
        Breakdown atPeak = null;
        try {
            for (int i = 0; i < trace.size(); i++) {
                clock[0] = i;
                if (trace.action(i) == Trace.ALLOCATE) {
                    AllocationStream stream = streams.computeIfAbsent(trace.stream(i),
                            k -> TraceReplayer.newStream(timing, streams.size(), clock));
                    DeviceBlock block = allocator.allocate(trace.bytes(i), stream);
                    live.put(trace.pointer(i), block);
                    liveBytes += block.requestedBytes();
                    if (stream instanceof RequestEndReplayStream tracked) {
                        tracked.allocated(block.requestedBytes());
                    }
                    long reserved = allocator.metrics().reservedBytes();
                    if (reserved > peakReserved) {
                        peakReserved = reserved;
                        atPeak = allocator.metrics() instanceof PoolMetrics pool ? take(pool, liveBytes) : null;
                    }
                } else if (trace.action(i) == Trace.FREE) {
                    DeviceBlock block = live.remove(trace.pointer(i));
                    if (block != null) {
                        liveBytes -= block.requestedBytes();
                        block.release();
                        if (block.stream() instanceof RequestEndReplayStream tracked) {
                            tracked.freed(block.requestedBytes());
                        }
                    }
                }
            }
            var counters = allocator.metrics().counters();
            double hitRate = counters.allocations() == 0 ? 0 : (double) counters.localHits() / counters.allocations();
            if (atPeak != null) {
                atPeak = new Breakdown(atPeak.reserved(), atPeak.live(), atPeak.rounding(), atPeak.localCaches(),
                        atPeak.slabFree(), atPeak.buddyFreeInUsedChunks(), atPeak.buddyFreeInEmptyChunks(),
                        atPeak.fencedFree(), atPeak.idleDedicated(), atPeak.buddyChunks(), atPeak.dedicatedChunks(), hitRate,
                        source.allocations() + source.maps());
            }
        } finally {
            live.values().forEach(DeviceBlock::release);
            allocator.close();
        }
        return atPeak;
    }

    /**
     * {@code [--requests N] [--streams N] [--seed N] [--strategies a,b] [--fence-lag N|request]}: prints
     * the breakdown per strategy.
     */
    public static void main(String[] args) {
        InferenceTraceGenerator.Config config = InferenceTraceGenerator.Config.bertBase();
        String names = "two-level,global-only,two-level-lazy-256";
        FenceTiming timing = FenceTiming.IMMEDIATE;
        for (int i = 0; i + 1 < args.length; i += 2) {
            switch (args[i]) {
                case "--requests" -> config = config.withRequests(Integer.parseInt(args[i + 1]));
                case "--streams" -> config = config.withStreams(Integer.parseInt(args[i + 1]));
                case "--seed" -> config = config.withSeed(Long.parseLong(args[i + 1]));
                case "--strategies" -> names = args[i + 1];
                case "--fence-lag" -> timing = FenceTiming.parse(args[i + 1]);
                default -> throw new IllegalArgumentException("unknown option '" + args[i] + "'");
            }
        }
        Trace trace = new InferenceTraceGenerator(config).generate();
        long peakLive = TraceReplayer.peakLive(trace);
        System.out.printf(Locale.ROOT, "trace: %s; peak live %.1f MiB; fences %s%n", config, peakLive / 1048576.0, timing);
        for (String name : names.split(",")) {
            System.out.println(name.strip() + ":");
            System.out.print(atPeak(trace, ReplayStrategies.byName(name.strip()), 141L << 30, timing).describe(peakLive));
        }
    }
}
