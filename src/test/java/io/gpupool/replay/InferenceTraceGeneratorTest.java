package io.gpupool.replay;

import io.gpupool.memory.trace.Trace;

import org.junit.jupiter.api.Test;

import java.util.HashMap;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class InferenceTraceGeneratorTest {

    private final InferenceTraceGenerator.Config small = InferenceTraceGenerator.Config.bertBase().withRequests(40)
            .withStreams(6);

    @Test
    void everyAllocationIsFreedOnceAndPointersAreUniqueWhileLive() {
        Trace trace = new InferenceTraceGenerator(small).generate();
        Map<Long, Long> live = new HashMap<>();
        Set<Integer> streams = new HashSet<>();
        long allocations = 0;
        for (int i = 0; i < trace.size(); i++) {
            if (trace.action(i) == Trace.ALLOCATE) {
                assertThat(live.put(trace.pointer(i), trace.bytes(i))).as("pointer live twice at event %d", i).isNull();
                assertThat(trace.bytes(i)).isPositive();
                streams.add(trace.stream(i));
                allocations++;
            } else {
                assertThat(live.remove(trace.pointer(i))).as("free of a dead pointer at event %d", i)
                        .isEqualTo(trace.bytes(i));
            }
        }
        assertThat(live).isEmpty();
        assertThat(streams).hasSize(6);
        // per request: 3 inputs + embeddings + 12 layers x 12 tensors + pooled + logits
        assertThat(allocations).isEqualTo(40L * (3 + 1 + 12 * 12 + 2));
    }

    @Test
    void theSameSeedGivesTheSameTraceAndStepsInterleaveAcrossStreams() {
        Trace a = new InferenceTraceGenerator(small).generate();
        Trace b = new InferenceTraceGenerator(small).generate();
        Trace c = new InferenceTraceGenerator(small.withSeed(43)).generate();
        assertThat(a.size()).isEqualTo(b.size());
        boolean differs = false;
        int switches = 0;
        for (int i = 0; i < a.size(); i++) {
            assertThat(a.bytes(i)).isEqualTo(b.bytes(i));
            differs |= i < c.size() && a.bytes(i) != c.bytes(i);
            if (i > 0 && a.stream(i) != a.stream(i - 1)) {
                switches++;
            }
        }
        assertThat(differs).isTrue();
        assertThat(switches).isGreaterThan(a.size() / 10);
    }

    @Test
    void attentionScoresHaveBatchHeadsSeqSquaredElements() {
        // step 3 of a request is the first layer's scores allocation: B * 12 * S * S * 4 bytes
        Trace trace = new InferenceTraceGenerator(small.withRequests(1).withStreams(1)).generate();
        assertThat(trace.bytes(0)).isEqualTo(trace.bytes(1)); // ids and token types: B*S*8 each
        long tokens = trace.bytes(0) / 8;
        assertThat(trace.bytes(3)).isEqualTo(tokens * 768 * 4); // embeddings
        long scores = trace.bytes(7);
        assertThat(trace.action(7)).isEqualTo(Trace.ALLOCATE);
        // scores / (12 * 4) = B * S * S = tokens * S, so S = scores / 48 / tokens and B = tokens / S
        long seq = scores / 48 / tokens;
        assertThat(seq).isBetween(16L, 512L);
        assertThat(tokens % seq).isZero();
        assertThat(tokens / seq).isBetween(1L, 32L);
    }

    @Test
    void badParametersAreRejectedByName() {
        assertThatThrownBy(() -> small.withStreams(0)).hasMessageContaining("streams");
        assertThatThrownBy(() -> new InferenceTraceGenerator.Config(1, 1, 1, 768, 12, 3072, 12, 4, 32, 512, 16, 128,
                0.7)).hasMessageContaining("seqMax");
    }
}
