package io.gpupool.replay;

import io.gpupool.memory.trace.Trace;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.function.LongPredicate;

/**
 * Command line for trace replay and the fragmentation study.
 *
 * <pre>
 *   java -cp target/classes io.gpupool.replay.TraceReplayMain [options]
 *     --trace FILE          replay this RMM-format CSV trace
 *     --generate            instead, generate a BERT-style inference trace (InferenceTraceGenerator)
 *       --requests N        requests to generate (2000)
 *       --streams N         concurrent streams (16)
 *       --seed N            random seed (42)
 *     --serving-arenas      instead, generate the server's default load with request arenas (ServingArenaTrace:
 *                           BERT-base BF16, 4 streams, 4000 requests; --requests, --streams, --seed apply)
 *       --serving-shape B,M,S,X   requests of batch 1..B, sequence median M, log-sigma S, at most X
 *                           (default 32,96,0.7,512; issue 15's short load: 4,24,0.6,128)
 *       --serving-precision P   BF16 (default) or FP32: the activations' width, so the arenas' bytes per token
 *     --maintain-every N    run the pool's maintenance after every N events (the server's once a second;
 *                           ServingArenaTrace makes about 2000 events a second of its load)
 *     --request-arena       replay each request as one allocation of its arena (RequestArenaTrace), as the
 *                           server allocates with gpupool.serving.request-arena
 *     --arenas              with --trace: every allocation on a stream is a request arena (a trace the server
 *                           recorded with gpupool.serving.request-arena on)
 *     --write-trace FILE    also write the (generated) trace as CSV
 *     --strategies A,B      strategies to replay against (default: all known)
 *     --capacity-gib N      size of the simulated device (141)
 *     --json FILE           write the results as JSON
 *     --pool-tuning K=V,..  replay the pool with these PoolTuning values applied to the defaults
 *                           (strategies two-level*, global-only*, best-fit), e.g.
 *                           localCacheBytesPerStream=32m,coalesceThreshold=1,maxGrowthStepBytes=256m
 *     --min-capacity        also search the smallest device each strategy runs the trace on
 *                           (binary search to 16 MiB; about 12 more replays per strategy)
 *     --fence-lag N         fences complete N events after they were recorded instead of at once
 *                           (the device running behind the host; not with --min-capacity); also prints
 *                           what an allocator that never makes a stream wait would need (noWaitPeakBytes)
 *     --fence-lag request   fences complete when the recording stream's request ends (its live bytes
 *                           return to 0), as the server synchronises each stream at the end of a request
 * </pre>
 * Prints one line per strategy: peak live, peak reserved, their ratio, the rounding at the allocated
 * peak (block bytes / requested bytes), chunk allocations, local hits and time;
 * with {@code --min-capacity} also the smallest device that suffices, and its ratio to peak live.
 */
public final class TraceReplayMain {

    private TraceReplayMain() {
    }

    public static void main(String[] args) throws IOException {
        Path tracePath = null;
        boolean generate = false;
        InferenceTraceGenerator.Config config = InferenceTraceGenerator.Config.bertBase();
        Path writeTrace = null;
        Path json = null;
        List<TraceReplayer.Strategy> strategies = ReplayStrategies.all();
        long capacity = 141L << 30;
        boolean minCapacity = false;
        boolean requestArena = false;
        boolean servingArenas = false;
        boolean recordedArenas = false;
        ServingArenaTrace.Config serving = ServingArenaTrace.Config.bf16Default();
        long maintainEvery = 0;
        FenceTiming fenceTiming = FenceTiming.IMMEDIATE;
        for (int i = 0; i < args.length; i++) {
            String arg = args[i];
            switch (arg) {
                case "--trace" -> tracePath = Path.of(value(args, ++i, arg));
                case "--generate" -> generate = true;
                case "--min-capacity" -> minCapacity = true;
                case "--request-arena" -> requestArena = true;
                case "--serving-arenas" -> servingArenas = true;
                case "--arenas" -> recordedArenas = true;
                case "--maintain-every" -> maintainEvery = Long.parseLong(value(args, ++i, arg));
                case "--fence-lag" -> fenceTiming = FenceTiming.parse(value(args, ++i, arg));
                case "--requests" -> {
                    int requests = Integer.parseInt(value(args, ++i, arg));
                    config = config.withRequests(requests);
                    serving = serving.withRequests(requests);
                }
                case "--streams" -> {
                    int streams = Integer.parseInt(value(args, ++i, arg));
                    config = config.withStreams(streams);
                    serving = serving.withStreams(streams);
                }
                case "--seed" -> {
                    long seed = Long.parseLong(value(args, ++i, arg));
                    config = config.withSeed(seed);
                    serving = serving.withSeed(seed);
                }
                case "--serving-shape" -> {
                    String[] shape = value(args, ++i, arg).split(",");
                    if (shape.length != 4) {
                        throw new IllegalArgumentException("--serving-shape " + String.join(",", shape)
                                + " is invalid; allowed: BATCH_MAX,SEQ_MEDIAN,SEQ_SIGMA,SEQ_MAX");
                    }
                    serving = serving.withShape(Integer.parseInt(shape[0]), Double.parseDouble(shape[1]),
                            Double.parseDouble(shape[2]), Integer.parseInt(shape[3]));
                }
                case "--serving-precision" -> {
                    String precision = value(args, ++i, arg);
                    serving = switch (precision) {
                        case "BF16" -> serving.withBytesPerToken(ServingArenaTrace.Config.BF16_BYTES_PER_TOKEN);
                        case "FP32" -> serving.withBytesPerToken(ServingArenaTrace.Config.FP32_BYTES_PER_TOKEN);
                        default -> throw new IllegalArgumentException(
                                "--serving-precision " + precision + " is invalid; allowed: BF16, FP32");
                    };
                }
                case "--write-trace" -> writeTrace = Path.of(value(args, ++i, arg));
                case "--json" -> json = Path.of(value(args, ++i, arg));
                case "--capacity-gib" -> capacity = Long.parseLong(value(args, ++i, arg)) << 30;
                case "--pool-tuning" -> strategies = ReplayStrategies.tuned(
                        ReplayStrategies.parseTuning(value(args, ++i, arg)));
                case "--strategies" -> {
                    strategies = new ArrayList<>();
                    for (String name : value(args, ++i, arg).split(",")) {
                        strategies.add(ReplayStrategies.byName(name.strip()));
                    }
                }
                default -> throw new IllegalArgumentException("unknown option '" + arg + "'; see the class comment of "
                        + TraceReplayMain.class.getName());
            }
        }
        if (recordedArenas && tracePath == null) {
            throw new IllegalArgumentException("--arenas is for --trace FILE (the generated traces know their arenas)");
        }
        boolean lagging = !fenceTiming.equals(FenceTiming.IMMEDIATE);
        if (lagging && minCapacity) {
            throw new IllegalArgumentException("--fence-lag " + fenceTiming + " is invalid with --min-capacity; allowed: 0");
        }
        if ((generate ? 1 : 0) + (servingArenas ? 1 : 0) + (tracePath != null ? 1 : 0) != 1) {
            throw new IllegalArgumentException("give exactly one of --trace FILE, --generate or --serving-arenas");
        }
        Trace trace = generate ? new InferenceTraceGenerator(config).generate()
                : servingArenas ? ServingArenaTrace.generate(serving) : Trace.read(tracePath);
        if (requestArena) {
            trace = RequestArenaTrace.of(trace);
        }
        if (writeTrace != null) {
            trace.write(writeTrace);
        }
        String what = (generate ? "generated " + config
                : servingArenas ? "serving arenas " + serving : tracePath.toString())
                + (requestArena ? ", request arenas" : "");
        System.out.printf(Locale.ROOT, "trace: %s, %d events%n", what, trace.size());
        if (lagging) {
            long peakLive = TraceReplayer.peakLive(trace);
            long reference = TraceReplayer.noWaitPeakBytes(trace, fenceTiming);
            String when = fenceTiming instanceof FenceTiming.Lag lag ? lag.events() + " events late"
                    : "when their stream's request ends";
            System.out.printf(Locale.ROOT, "fences complete %s; an allocator that never makes a stream wait "
                    + "needs about %.1f MiB (%.3f x peak live; bytes only, no fragmentation)%n",
                    when, reference / 1048576.0, (double) reference / peakLive);
        }
        LongPredicate arenas = requestArena ? RequestArenaTrace::isArena
                : servingArenas || recordedArenas ? TraceReplayer.ARENAS_ON_STREAMS : TraceReplayer.NO_ARENAS;
        List<TraceReplayer.Result> results = new ArrayList<>();
        List<Long> minimums = new ArrayList<>();
        for (TraceReplayer.Strategy strategy : strategies) {
            TraceReplayer.Result r;
            try {
                r = TraceReplayer.replay(trace, strategy, SimulatedChunkSource.withMapping("replay", capacity),
                        fenceTiming, maintainEvery, arenas);
            } catch (UnsupportedOperationException e) {
                System.out.printf(Locale.ROOT, "%-12s skipped: %s%n", strategy.name(), e.getMessage());
                continue;
            }
            results.add(r);
            long minimum = minCapacity
                    ? TraceReplayer.minimumCapacity(trace, strategy, capacity, 16L << 20, maintainEvery, arenas) : -1;
            minimums.add(minimum);
            System.out.printf(Locale.ROOT,
                    "%-12s peak live %8.1f MiB  peak reserved %8.1f MiB  ratio %.3f  rounding %.3f  chunks %5d (%d despite free)  maps %d (%.0f MiB, %d physical allocations) unmaps %d  local hits %.1f %%  waits %d  failed %d  %7.1f ms (%.0f ns/event)%n",
                    r.strategy(), r.peakLiveBytes() / 1048576.0, r.peakReservedBytes() / 1048576.0, r.overhead(), r.rounding(),
                    r.chunkAllocations(), r.growsDespiteFreeBytes(), r.mapCalls(), r.mappedBytesTotal() / 1048576.0, r.mappedExtents(), r.unmapCalls(), 100 * r.localHitRatio(), r.crossStreamWaits(), r.failedAllocations(),
                    r.elapsedNanos() / 1e6, r.nanosPerEvent());
            if (minCapacity) {
                System.out.printf(Locale.ROOT, "%-12s smallest device that fits: %8.1f MiB  ratio to peak live %.3f%n",
                        r.strategy(), minimum / 1048576.0, (double) minimum / r.peakLiveBytes());
            }
        }
        if (json != null) {
            Files.writeString(json, toJson(what, trace.size(), results, minimums), StandardCharsets.UTF_8);
        }
    }

    static String toJson(String trace, int events, List<TraceReplayer.Result> results, List<Long> minimums) {
        StringBuilder out = new StringBuilder("{\n  \"trace\": \"").append(trace.replace("\\", "\\\\").replace("\"", "\\\""))
                .append("\",\n  \"events\": ").append(events).append(",\n  \"results\": [");
        for (int i = 0; i < results.size(); i++) {
            TraceReplayer.Result r = results.get(i);
            out.append(i == 0 ? "\n" : ",\n").append(String.format(Locale.ROOT,
                    "    {\"strategy\": \"%s\", \"peakLiveBytes\": %d, \"peakReservedBytes\": %d, \"overhead\": %.4f, "
                            + "\"chunkAllocations\": %d, \"growsDespiteFreeBytes\": %d, \"allocations\": %d, \"frees\": %d, \"failedAllocations\": %d, "
                            + "\"unmatchedFrees\": %d, \"elapsedNanos\": %d, \"minimumCapacityBytes\": %d, \"mapCalls\": %d, \"unmapCalls\": %d, \"mappedBytesTotal\": %d, \"mappedExtents\": %d, \"localHits\": %d, \"crossStreamWaits\": %d, \"peakAllocatedBytes\": %d, \"requestedAtPeakAllocated\": %d}",
                    r.strategy(), r.peakLiveBytes(), r.peakReservedBytes(), r.overhead(), r.chunkAllocations(),
                    r.growsDespiteFreeBytes(), r.allocations(), r.frees(), r.failedAllocations(), r.unmatchedFrees(), r.elapsedNanos(),
                    minimums.get(i), r.mapCalls(), r.unmapCalls(), r.mappedBytesTotal(), r.mappedExtents(), r.localHits(), r.crossStreamWaits(), r.peakAllocatedBytes(), r.requestedAtPeakAllocated()));
        }
        return out.append("\n  ]\n}\n").toString();
    }

    private static String value(String[] args, int i, String option) {
        if (i >= args.length) {
            throw new IllegalArgumentException(option + " needs a value");
        }
        return args[i];
    }
}
