package io.gpupool.memory.trace;

import io.gpupool.memory.AllocationStream;
import io.gpupool.memory.ChunkSource;
import io.gpupool.memory.DeviceAllocator;
import io.gpupool.memory.DeviceBlock;
import io.gpupool.memory.OutOfDeviceMemoryException;
import io.gpupool.memory.source.SimulatedChunkSource;
import io.gpupool.memory.source.StatisticsChunkSource;

import java.util.ArrayList;
import java.util.HashMap;
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
                         long elapsedNanos) {

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

    /** Replays against a fresh allocator over a simulated device of {@code capacityBytes}. */
    public static Result replay(Trace trace, Strategy strategy, long capacityBytes) {
        return replay(trace, strategy, new SimulatedChunkSource("replay", capacityBytes));
    }

    /** Replays against a fresh allocator built over {@code source}. */
    public static Result replay(Trace trace, Strategy strategy, ChunkSource source) {
        StatisticsChunkSource statistics = new StatisticsChunkSource(source);
        DeviceAllocator allocator = strategy.factory().apply(statistics);
        HashMap<Integer, AllocationStream> streams = new HashMap<>();
        HashMap<Long, DeviceBlock> live = new HashMap<>();
        long liveBytes = 0;
        long peakLive = 0;
        long allocations = 0;
        long frees = 0;
        long failed = 0;
        long unmatched = 0;
        int n = trace.size();
        long start = System.nanoTime();
        long elapsed;
        try {
            for (int i = 0; i < n; i++) {
                byte action = trace.action(i);
                if (action == Trace.ALLOCATE) {
                    long pointer = trace.pointer(i);
                    long bytes = trace.bytes(i);
                    if (live.containsKey(pointer)) {
                        throw new IllegalArgumentException("event " + i + ": pointer 0x" + Long.toHexString(pointer)
                                + " allocated again before it was freed; the trace is inconsistent");
                    }
                    AllocationStream stream = streams.computeIfAbsent(trace.stream(i),
                            key -> new ReplayStream(streams.size()));
                    DeviceBlock block;
                    try {
                        block = allocator.allocate(bytes, stream);
                    } catch (OutOfDeviceMemoryException e) {
                        failed++;
                        continue;
                    }
                    live.put(pointer, block);
                    allocations++;
                    liveBytes += bytes;
                    if (liveBytes > peakLive) {
                        peakLive = liveBytes;
                    }
                } else if (action == Trace.FREE) {
                    DeviceBlock block = live.remove(trace.pointer(i));
                    if (block == null) {
                        unmatched++;
                        continue;
                    }
                    liveBytes -= block.requestedBytes();
                    block.release();
                    frees++;
                }
            }
            elapsed = System.nanoTime() - start;
        } finally {
            for (DeviceBlock block : new ArrayList<>(live.values())) {
                block.release();
            }
            allocator.close();
        }
        return new Result(strategy.name(), n, allocations, frees, failed, unmatched, peakLive,
                statistics.peakReservedBytes(), statistics.allocations(), elapsed);
    }
}
