package io.gpupool.memory.pool;

import org.junit.jupiter.api.Test;

import java.util.Random;

import static org.assertj.core.api.Assertions.assertThat;

class ChunkMappingTest {

    /** The mapped-unit count a placement decision reads equals the units marked mapped, for ranges across word edges. */
    @Test
    void countMappedCountsExactlyTheMarkedUnitsOfEveryRange() {
        int units = 200;
        Chunk chunk = new Chunk(0, 0, (long) units << 21, units, false, true);
        boolean[] expected = new boolean[units];
        Random random = new Random(15);
        for (int step = 0; step < 60; step++) {
            int from = random.nextInt(units);
            int to = from + 1 + random.nextInt(units - from);
            boolean state = random.nextBoolean();
            synchronized (chunk.mapped) {
                chunk.markMapped(from, to, state);
            }
            for (int u = from; u < to; u++) {
                expected[u] = state;
            }
            for (int a = 0; a < units; a += 3) {
                for (int b = a; b <= units; b += 5) {
                    long count = 0;
                    for (int u = a; u < b; u++) {
                        count += expected[u] ? 1 : 0;
                    }
                    synchronized (chunk.mapped) {
                        assertThat(chunk.countMapped(a, b)).as("mapped units in [" + a + ", " + b + ")").isEqualTo(count);
                    }
                }
            }
        }
    }
}
