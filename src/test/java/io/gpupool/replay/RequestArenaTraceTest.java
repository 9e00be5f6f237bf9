package io.gpupool.replay;

import io.gpupool.memory.trace.Trace;
import org.junit.jupiter.api.Test;

import java.util.HashMap;
import java.util.Map;

import static org.assertj.core.api.Assertions.assertThat;

/** The BERT serving trace rewritten with one arena per request. */
class RequestArenaTraceTest {

    private final InferenceTraceGenerator.Config config = InferenceTraceGenerator.Config.bertBase().withRequests(24)
            .withStreams(4);

    @Test
    void oneRequestBecomesOneAllocationOfItsPeak() {
        Trace perTensor = new InferenceTraceGenerator(config.withRequests(1).withStreams(1)).generate();
        Trace arena = RequestArenaTrace.of(perTensor);

        assertThat(arena.size()).isEqualTo(2);
        assertThat(arena.action(0)).isEqualTo(Trace.ALLOCATE);
        assertThat(arena.action(1)).isEqualTo(Trace.FREE);
        assertThat(arena.bytes(0)).as("the chain packs to its liveness peak, rounded to 256 B per tensor")
                .isGreaterThanOrEqualTo(TraceReplayer.peakLive(perTensor))
                .isLessThan(TraceReplayer.peakLive(perTensor) + 256L * 64);
    }

    @Test
    void concurrentStreamsKeepTheirOrderAndEveryArenaIsFreed() {
        Trace perTensor = new InferenceTraceGenerator(config).generate();
        Trace arena = RequestArenaTrace.of(perTensor);

        assertThat(arena.size()).isEqualTo(2 * config.requests());
        Map<Long, Long> live = new HashMap<>();
        long time = Long.MIN_VALUE;
        for (int i = 0; i < arena.size(); i++) {
            assertThat(arena.timeNanos(i)).isGreaterThanOrEqualTo(time);
            time = arena.timeNanos(i);
            if (arena.action(i) == Trace.ALLOCATE) {
                assertThat(live.put(arena.pointer(i), arena.bytes(i))).isNull();
            } else {
                assertThat(live.remove(arena.pointer(i))).isEqualTo(arena.bytes(i));
            }
        }
        assertThat(live).isEmpty();
        assertThat(TraceReplayer.peakLive(arena)).as("arenas hold each request's peak for all of it")
                .isGreaterThanOrEqualTo(TraceReplayer.peakLive(perTensor));
    }
}
