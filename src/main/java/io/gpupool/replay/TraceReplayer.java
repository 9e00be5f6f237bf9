package io.gpupool.replay;

import io.gpupool.memory.trace.Trace;

import io.gpupool.memory.AllocationStream;
import io.gpupool.memory.ChunkSource;
import io.gpupool.memory.DeviceAllocator;
import io.gpupool.memory.DeviceBlock;
import io.gpupool.memory.OutOfDeviceMemoryException;
import io.gpupool.memory.VirtualMemory;
import io.gpupool.memory.pool.DevicePool;
import io.gpupool.memory.source.ForwardingChunkSource;
import io.gpupool.memory.source.ForwardingVirtualMemory;
import io.gpupool.replay.SimulatedChunkSource;
import io.gpupool.replay.StatisticsChunkSource;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.function.LongPredicate;
import java.util.Objects;
import java.util.function.Function;

/**
 * Replays an allocation {@link Trace} against any {@link DeviceAllocator} and measures how much
 * memory the allocator had to reserve for it.
 *
 * <h2>What is measured</h2>
 * <pre>
 *   peak live      = max over time of  sum(requested bytes of live blocks)   (what the program needed)
 *   peak reserved  = max over time of  bytes held from the ChunkSource       (what the device paid)
 *   overhead ratio = peak reserved / peak live                               (1.0 is perfect)
 *   grows despite free = chunk allocations (or maps) made while reserved - allocated &gt;= the request
 *   map / unmap calls  = source calls of a pool with MAPPED growth (memory mapped into address space)
 *   rounding       = peak of sum(block sizes of live blocks) / requested bytes live at that moment
 * </pre>
 * The allocator is built over a {@link StatisticsChunkSource} wrapping a source with no memory
 * behind it ({@link SimulatedChunkSource} by default), so any strategy can be measured the same
 * way, on any machine, and the time taken is the allocator's bookkeeping alone.
 *
 * <h2>Steps</h2>
 * <ol>
 *   <li>Give each distinct trace stream a dense ordinal (first appearance order); events with no
 *       stream share one extra stream.</li>
 *   <li>For each event in order: {@code allocate} asks the allocator for the size on that stream
 *       and remembers the block under the trace's pointer; {@code free} releases the remembered
 *       block; {@code allocate failure} is skipped.</li>
 *   <li>Frees of pointers never allocated in the trace are counted and skipped (a trace may start
 *       mid-run); a refused allocation is counted and its later free skipped.</li>
 *   <li>At the end, release what is still live and close the allocator.</li>
 * </ol>
 * Replay is single-threaded: the interleaving recorded in the trace is the interleaving replayed.
 */
public final class TraceReplayer {

    /** No allocation of the trace is a request arena. */
    public static final LongPredicate NO_ARENAS = pointer -> false;
    /** Every allocation on a stream is a request arena ({@link ServingArenaTrace}, a trace the server recorded). */
    public static final LongPredicate ARENAS_ON_STREAMS = pointer -> true;

    /** One strategy to replay against: a name for the report and a constructor over a source. */
    public record Strategy(String name, Function<ChunkSource, DeviceAllocator> factory) {
        public Strategy {
            Objects.requireNonNull(name, "name");
            Objects.requireNonNull(factory, "factory");
        }
    }

    /** What one replay measured. */
    public record Result(String strategy, int events, long allocations, long frees, long failedAllocations,
                         long unmatchedFrees, long peakLiveBytes, long peakReservedBytes, long chunkAllocations,
                         long growsDespiteFreeBytes, long elapsedNanos, long mapCalls, long unmapCalls, long mappedBytesTotal, long mappedExtents,
                         long localHits, long crossStreamWaits, long peakAllocatedBytes, long requestedAtPeakAllocated) {

        /** Allocations a stream's local cache served, as a fraction of all allocations; 0 without allocations. */
        public double localHitRatio() {
            return allocations == 0 ? 0.0 : (double) localHits / allocations;
        }

        /**
         * Rounding at the allocated peak: the most bytes the allocator handed out at once (block sizes:
         * size classes, whole units) over the bytes requested at that moment; NaN when nothing was live.
         */
        public double rounding() {
            return requestedAtPeakAllocated == 0 ? Double.NaN : (double) peakAllocatedBytes / requestedAtPeakAllocated;
        }

        /** peak reserved / peak live; NaN when nothing was live. */
        public double overhead() {
            return peakLiveBytes == 0 ? Double.NaN : (double) peakReservedBytes / peakLiveBytes;
        }

        /** Average wall time per replayed event, in nanoseconds. */
        public double nanosPerEvent() {
            return events == 0 ? 0.0 : (double) elapsedNanos / events;
        }
    }

    private TraceReplayer() {
    }

    /**
     * Counts chunk allocations made while the allocator already held at least the requested bytes
     * unused (reserved minus allocated, from its metrics): growth caused by fragmentation or by
     * caching, not by demand. Replay is single-threaded, so plain fields suffice.
     */
    private static final class GrowthWitness extends ForwardingChunkSource {
        DeviceAllocator allocator;
        long request;
        long growsDespiteFree;

        GrowthWitness(ChunkSource upstream) {
            super(upstream);
        }

        @Override
        public long allocate(long bytes) {
            witness();
            return upstream.allocate(bytes);
        }

        /** A map is growth of reserved memory too: counted like a chunk allocation. */
        @Override
        protected VirtualMemory decorate(VirtualMemory upstreamMemory) {
            return new ForwardingVirtualMemory(upstreamMemory) {
                @Override
                public void map(long address, long bytes, long extentBytes) {
                    witness();
                    upstream.map(address, bytes, extentBytes);
                }
            };
        }

        private void witness() {
            if (allocator != null) {
                var metrics = allocator.metrics();
                if (metrics.reservedBytes() - metrics.allocatedBytes() >= request) {
                    growsDespiteFree++;
                }
            }
        }
    }

    /**
     * The smallest simulated device (to within {@code granularityBytes}) on which the whole trace
     * replays without a refused allocation: a second measure of fragmentation that counts only
     * memory the allocator cannot do without (under pressure an allocator trims its caches and
     * retries, so a high peak reserved on an unbounded device may cost nothing on a real one).
     * Binary search between peak live and {@code maxBytes}; assumes more memory never causes a
     * refusal. Returns -1 if the trace does not fit even in {@code maxBytes}.
     */
    public static long minimumCapacity(Trace trace, Strategy strategy, long maxBytes, long granularityBytes) {
        return minimumCapacity(trace, strategy, maxBytes, granularityBytes, 0, NO_ARENAS);
    }

    /** Like {@link #minimumCapacity(Trace, Strategy, long, long)}, replayed with maintenance and arenas as given. */
    public static long minimumCapacity(Trace trace, Strategy strategy, long maxBytes, long granularityBytes,
                                       long maintainEvery, LongPredicate arenas) {
        if (fails(trace, strategy, maxBytes, maintainEvery, arenas)) {
            return -1;
        }
        long fits = maxBytes;
        long low = Math.max(granularityBytes, peakLive(trace)) - 1; // nothing below peak live can fit
        while (fits - low > granularityBytes) {
            long mid = low + (fits - low) / 2;
            if (!fails(trace, strategy, mid, maintainEvery, arenas)) {
                fits = mid;
            } else {
                low = mid;
            }
        }
        return fits;
    }

    private static boolean fails(Trace trace, Strategy strategy, long capacityBytes, long maintainEvery,
                                 LongPredicate arenas) {
        return replay(trace, strategy, SimulatedChunkSource.withMapping("replay", capacityBytes), FenceTiming.IMMEDIATE,
                maintainEvery, arenas).failedAllocations() > 0;
    }

    /** The largest sum of live requested bytes in the trace (frees of unknown pointers ignored). */
    public static long peakLive(Trace trace) {
        HashMap<Long, Long> live = new HashMap<>();
        long bytes = 0;
        long peak = 0;
        for (int i = 0; i < trace.size(); i++) {
            if (trace.action(i) == Trace.ALLOCATE) {
                live.put(trace.pointer(i), trace.bytes(i));
                bytes += trace.bytes(i);
                peak = Math.max(peak, bytes);
            } else if (trace.action(i) == Trace.FREE) {
                Long size = live.remove(trace.pointer(i));
                if (size != null) {
                    bytes -= size;
                }
            }
        }
        return peak;
    }

    /**
     * Reference point for replays with lagging fences: the peak memory of an idealised allocator that
     * never makes a stream wait, counting bytes only (no size classes, no fragmentation). Freed bytes
     * are reusable at once by the stream that freed them (stream order) and by every other stream
     * {@code fenceLagEvents} events later; an allocation takes its own stream's freed bytes first
     * (newest first, so older ones age into the shared pool), then shared bytes, and grows otherwise.
     * With a lag of 0 it equals {@link #peakLive}; an allocator that never shares across streams
     * would need up to the sum of the streams' own peaks. A greedy estimate, not a proven minimum.
     */
    public static long noWaitPeakBytes(Trace trace, long fenceLagEvents) {
        return noWaitPeakBytes(trace, new FenceTiming.Lag(fenceLagEvents));
    }

    /**
     * {@link #noWaitPeakBytes(Trace, long)} for any {@link FenceTiming}: with {@link FenceTiming.RequestEnd}
     * the bytes a stream freed become shared when its live bytes return to 0 (its request ended).
     */
    public static long noWaitPeakBytes(Trace trace, FenceTiming timing) {
        long fenceLagEvents = timing instanceof FenceTiming.Lag lag ? lag.events() : Long.MAX_VALUE;
        boolean atRequestEnd = timing instanceof FenceTiming.RequestEnd;
        HashMap<Integer, long[]> streamLive = new HashMap<>();      // stream -> {live bytes}
        HashMap<Long, long[]> live = new HashMap<>();               // pointer -> {stream, bytes}
        HashMap<Integer, java.util.ArrayDeque<long[]>> own = new HashMap<>();  // stream -> {readyAt, bytes}, oldest first
        java.util.ArrayDeque<long[]> aging = new java.util.ArrayDeque<>();    // {readyAt, stream, bytes} in free order
        long shared = 0;
        long reserved = 0;
        long peak = 0;
        for (int i = 0; i < trace.size(); i++) {
            while (!aging.isEmpty() && aging.peekFirst()[0] <= i) {  // freed bytes nobody reused: now shared
                long[] entry = aging.pollFirst();
                java.util.ArrayDeque<long[]> queue = own.get((int) entry[1]);
                long[] oldest = queue.peekFirst();
                if (oldest == entry) {                             // else its stream reused all of it
                    queue.pollFirst();
                    shared += entry[2];
                }
            }
            if (trace.action(i) == Trace.ALLOCATE) {
                int stream = trace.stream(i);
                long need = trace.bytes(i);
                live.put(trace.pointer(i), new long[] {stream, need});
                streamLive.computeIfAbsent(stream, k -> new long[1])[0] += need;
                java.util.ArrayDeque<long[]> queue = own.computeIfAbsent(stream, k -> new java.util.ArrayDeque<>());
                while (need > 0 && !queue.isEmpty()) {              // own freed bytes, newest first
                    long[] newest = queue.peekLast();
                    long take = Math.min(need, newest[2]);
                    newest[2] -= take;
                    need -= take;
                    if (newest[2] == 0) {
                        queue.pollLast();
                    }
                }
                long fromShared = Math.min(need, shared);
                shared -= fromShared;
                need -= fromShared;
                reserved += need;                                   // grow by what is left
            } else if (trace.action(i) == Trace.FREE) {
                long[] block = live.remove(trace.pointer(i));
                if (block == null) {
                    continue;
                }
                long[] streamBytes = streamLive.get((int) block[0]);
                streamBytes[0] -= block[1];
                if (fenceLagEvents <= 0) {
                    shared += block[1];
                } else {
                    long[] entry = {atRequestEnd ? Long.MAX_VALUE : i + fenceLagEvents, block[0], block[1]};
                    java.util.ArrayDeque<long[]> queue = own.computeIfAbsent((int) block[0], k -> new java.util.ArrayDeque<>());
                    queue.addLast(entry);
                    if (!atRequestEnd) {
                        aging.addLast(entry);
                    } else if (streamBytes[0] == 0) {               // the request ended: its frees are done
                        for (long[] done : queue) {
                            shared += done[2];
                        }
                        queue.clear();
                    }
                }
            }
            peak = Math.max(peak, reserved);
        }
        return peak;
    }

    /**
     * Replays against a fresh allocator over a simulated device of {@code capacityBytes} that
     * supports mapping, as the H200 does (strategies that do not map ignore it).
     */
    public static Result replay(Trace trace, Strategy strategy, long capacityBytes) {
        return replay(trace, strategy, capacityBytes, 0);
    }

    /** Like {@link #replay(Trace, Strategy, long)}, with fences completing {@code fenceLagEvents} events late. */
    public static Result replay(Trace trace, Strategy strategy, long capacityBytes, long fenceLagEvents) {
        return replay(trace, strategy, SimulatedChunkSource.withMapping("replay", capacityBytes), fenceLagEvents);
    }

    /** Replays against a fresh allocator built over {@code source}; fences complete at once. */
    public static Result replay(Trace trace, Strategy strategy, ChunkSource source) {
        return replay(trace, strategy, source, 0);
    }

    /**
     * Replays against a fresh allocator built over {@code source}; with {@code fenceLagEvents} &gt; 0
     * each stream's fences complete that many events after they were recorded
     * ({@link LaggingReplayStream}), as when the device runs behind the host.
     */
    public static Result replay(Trace trace, Strategy strategy, ChunkSource source, long fenceLagEvents) {
        return replay(trace, strategy, source, new FenceTiming.Lag(fenceLagEvents));
    }

    /** Like {@link #replay(Trace, Strategy, long)}, with the fences completing as {@code timing} says. */
    public static Result replay(Trace trace, Strategy strategy, long capacityBytes, FenceTiming timing) {
        return replay(trace, strategy, SimulatedChunkSource.withMapping("replay", capacityBytes), timing);
    }

    /**
     * A replay stream whose fences complete as {@code timing} says; {@code clock} holds the index of
     * the event being replayed (read by lagging fences).
     */
    static AllocationStream newStream(FenceTiming timing, int ordinal, long[] clock) {
        if (timing instanceof FenceTiming.RequestEnd) {
            return new RequestEndReplayStream(ordinal);
        }
        long lag = ((FenceTiming.Lag) timing).events();
        return lag > 0 ? new LaggingReplayStream(ordinal, clock, lag) : new ReplayStream(ordinal);
    }

    /** Replays against a fresh allocator built over {@code source}, the fences completing as {@code timing} says. */
    public static Result replay(Trace trace, Strategy strategy, ChunkSource source, FenceTiming timing) {
        return replay(trace, strategy, source, timing, 0);
    }

    /**
     * Like {@link #replay(Trace, Strategy, ChunkSource, FenceTiming)}; with {@code maintainEvery} &gt; 0 a pool's
     * {@link DevicePool#maintain()} runs after every that many events, as the server's maintenance thread runs
     * once a second (its budget reclaim under {@code budget-reclaim: PERIODIC}).
     */
    public static Result replay(Trace trace, Strategy strategy, ChunkSource source, FenceTiming timing,
                                long maintainEvery) {
        return replay(trace, strategy, source, timing, maintainEvery, NO_ARENAS);
    }

    /**
     * Like {@link #replay(Trace, Strategy, ChunkSource, FenceTiming, long)}; an allocation on a stream whose pointer
     * {@code arenas} accepts is a request arena ({@link DeviceAllocator#allocateArena}), as the server allocates with
     * {@code gpupool.serving.request-arena}: {@link #ARENAS_ON_STREAMS}, or {@link RequestArenaTrace#isArena}.
     */
    public static Result replay(Trace trace, Strategy strategy, ChunkSource source, FenceTiming timing,
                                long maintainEvery, LongPredicate arenas) {
        StatisticsChunkSource statistics = new StatisticsChunkSource(source);
        GrowthWitness witness = new GrowthWitness(statistics);
        DeviceAllocator allocator = strategy.factory().apply(witness);
        witness.allocator = allocator;
        DevicePool arenaRounding = allocator.capability(DevicePool.class).orElse(null);
        HashMap<Integer, AllocationStream> streams = new HashMap<>();
        long[] clock = {0};                                        // the event being replayed, for lagging fences
        HashMap<Long, DeviceBlock> live = new HashMap<>();
        long liveBytes = 0;
        long peakLive = 0;
        long allocatedBytes = 0;
        long peakAllocated = 0;
        long requestedAtPeakAllocated = 0;
        long allocations = 0;
        long frees = 0;
        long failed = 0;
        long unmatched = 0;
        long localHits = 0;
        long crossStreamWaits = 0;
        int n = trace.size();
        long start = System.nanoTime();
        long elapsed;
        try {
            for (int i = 0; i < n; i++) {
                clock[0] = i;
                byte action = trace.action(i);
                if (action == Trace.ALLOCATE) {
                    long pointer = trace.pointer(i);
                    long bytes = trace.bytes(i);
                    if (live.containsKey(pointer)) {
                        throw new IllegalArgumentException("event " + i + ": pointer 0x" + Long.toHexString(pointer)
                                + " allocated again before it was freed; the trace is inconsistent");
                    }
                    AllocationStream stream = streams.computeIfAbsent(trace.stream(i),
                            key -> newStream(timing, streams.size(), clock));
                    DeviceBlock block;
                    boolean arena = trace.stream(i) != Trace.NO_STREAM && arenas.test(pointer);
                    witness.request = arena && arenaRounding != null ? arenaRounding.arenaBlockBytes(bytes) : bytes;
                    try {
                        block = arena ? allocator.allocateArena(bytes, stream) : allocator.allocate(bytes, stream);
                    } catch (OutOfDeviceMemoryException e) {
                        failed++;
                        continue;
                    }
                    live.put(pointer, block);
                    if (stream instanceof RequestEndReplayStream tracked) {
                        tracked.allocated(block.requestedBytes());
                    }
                    allocations++;
                    liveBytes += bytes;
                    if (liveBytes > peakLive) {
                        peakLive = liveBytes;
                    }
                    allocatedBytes += block.size();
                    if (allocatedBytes > peakAllocated) {
                        peakAllocated = allocatedBytes;
                        requestedAtPeakAllocated = liveBytes;
                    }
                } else if (action == Trace.FREE) {
                    DeviceBlock block = live.remove(trace.pointer(i));
                    if (block == null) {
                        unmatched++;
                        continue;
                    }
                    liveBytes -= block.requestedBytes();
                    allocatedBytes -= block.size();
                    if (arenas.test(trace.pointer(i)) && block.stream() instanceof RequestEndReplayStream tracked
                            && tracked.holdsOnly(block.requestedBytes())) {
                        block.releaseSettled();                    // the server's arena: freed after the request's sync
                    } else {
                        block.release();
                    }
                    frees++;
                    if (block.stream() instanceof RequestEndReplayStream tracked) {
                        tracked.freed(block.requestedBytes());     // after the release: its fence ends with the request
                    }
                }
                if (maintainEvery > 0 && (i + 1) % maintainEvery == 0 && allocator instanceof DevicePool pool) {
                    pool.maintain();
                }
            }
            elapsed = System.nanoTime() - start;
            localHits = allocator.metrics().counters().localHits();
            if (allocator.metrics() instanceof io.gpupool.memory.metric.PoolMetrics pool) {
                crossStreamWaits = pool.crossStreamWaits();
            }
        } finally {
            for (DeviceBlock block : new ArrayList<>(live.values())) {
                block.release();
            }
            allocator.close();
        }
        return new Result(strategy.name(), n, allocations, frees, failed, unmatched, peakLive,
                statistics.peakReservedBytes(), statistics.allocations(), witness.growsDespiteFree, elapsed,
                statistics.maps(), statistics.unmaps(), statistics.mappedBytesTotal(),
                statistics.mappedExtentsTotal(), localHits, crossStreamWaits, peakAllocated, requestedAtPeakAllocated);
    }
}
