package io.gpupool.replay;

import io.gpupool.memory.trace.Trace;
import org.junit.jupiter.api.Test;

import java.io.StringWriter;
import java.util.HashMap;
import java.util.Map;

import static org.assertj.core.api.Assertions.assertThat;

/** The server's default load with request arenas as a trace: one arena at a time per stream, in time order. */
class ServingArenaTraceTest {

    private final ServingArenaTrace.Config config = ServingArenaTrace.Config.bf16Default().withRequests(400);

    @Test
    void eachStreamHoldsOneArenaAtATimeBesideTheWorkspaces() {
        Trace trace = ServingArenaTrace.generate(config);
        assertThat(trace.size()).as("workspaces, then an allocate and a free per request").isEqualTo(4 + 2 * 400);
        Map<Integer, Long> open = new HashMap<>();
        long previousTime = 0;
        int workspaces = 0;
        for (int i = 0; i < trace.size(); i++) {
            assertThat(trace.timeNanos(i)).as("event %d in time order", i).isGreaterThanOrEqualTo(previousTime);
            previousTime = trace.timeNanos(i);
            if (trace.stream(i) == Trace.NO_STREAM) {
                assertThat(trace.bytes(i)).isEqualTo(config.workspaceBytes());
                workspaces++;
                continue;
            }
            long bytes = trace.bytes(i);
            assertThat(bytes % 256).isZero();
            assertThat(bytes).isBetween(config.bytesPerToken(), 32L * 512 * config.bytesPerToken() + 255);
            if (trace.action(i) == Trace.ALLOCATE) {
                assertThat(open.put(trace.stream(i), trace.pointer(i))).as("one arena per stream").isNull();
            } else {
                assertThat(open.remove(trace.stream(i))).isEqualTo(trace.pointer(i));
            }
        }
        assertThat(workspaces).isEqualTo(4);
        assertThat(open).isEmpty();
    }

    @Test
    void theSameSeedGivesTheSameTrace() throws Exception {
        assertThat(csv(ServingArenaTrace.generate(config))).isEqualTo(csv(ServingArenaTrace.generate(config)))
                .isNotEqualTo(csv(ServingArenaTrace.generate(config.withSeed(7))));
    }

    /**
     * The pool as the server sets it (ON_MAP with waiting) replayed with its maintenance: every allocation served,
     * arenas mostly from the streams' caches.
     */
    @Test
    void thePoolServesTheStreamsArenasFromTheirReserves() {
        Trace trace = ServingArenaTrace.generate(config);
        TraceReplayer.Result result = TraceReplayer.replay(trace, ReplayStrategies.byName("two-level-server"),
                SimulatedChunkSource.withMapping("test", 64L << 30), FenceTiming.IMMEDIATE, 200, TraceReplayer.ARENAS_ON_STREAMS);
        assertThat(result.failedAllocations()).isZero();
        assertThat(result.localHitRatio()).isGreaterThan(0.6);
        assertThat(result.rounding()).isLessThan(1.05);
    }

    /**
     * Short requests (batch 1–4, tens of tokens) make arenas below the minimum block: as arenas they are served by
     * the streams' caches almost always and map almost nothing; as ordinary allocations their small-object slabs
     * come and go with every size seen.
     */
    @Test
    void shortRequestsArenasStayInTheStreamsCaches() {
        Trace trace = ServingArenaTrace.generate(config.withShape(4, 24, 0.6, 128));
        TraceReplayer.Result arenas = TraceReplayer.replay(trace, ReplayStrategies.byName("two-level"),
                SimulatedChunkSource.withMapping("test", 64L << 30), FenceTiming.IMMEDIATE, 200, TraceReplayer.ARENAS_ON_STREAMS);
        TraceReplayer.Result ordinary = TraceReplayer.replay(trace, ReplayStrategies.byName("two-level"),
                SimulatedChunkSource.withMapping("test", 64L << 30), FenceTiming.IMMEDIATE, 200, TraceReplayer.NO_ARENAS);
        assertThat(arenas.failedAllocations()).isZero();
        assertThat(arenas.localHitRatio()).isGreaterThan(0.95);
        assertThat(arenas.mapCalls()).as("maps per request").isLessThan(config.requests() / 20);
        assertThat(ordinary.mapCalls()).isGreaterThan(4 * arenas.mapCalls());
    }

    private static String csv(Trace trace) throws Exception {
        StringWriter out = new StringWriter();
        trace.write(out);
        return out.toString();
    }
}
