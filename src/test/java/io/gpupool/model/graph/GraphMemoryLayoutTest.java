package io.gpupool.model.graph;

import org.junit.jupiter.api.RepeatedTest;
import org.junit.jupiter.api.Test;

import java.util.Random;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class GraphMemoryLayoutTest {

    private static final Random SEEDS = new Random(4);

    @RepeatedTest(200)
    void tensorsAliveTogetherNeverShareABlockNeverExceedsItAndItIsAtLeastThePeak() {
        Random random = new Random(SEEDS.nextLong());
        int n = 1 + random.nextInt(60);
        long[] sizes = new long[n];
        int[] births = new int[n];
        int[] deaths = new int[n];
        int event = 0;
        for (int i = 0; i < n; i++) {
            sizes[i] = 1 + random.nextInt(1 << (4 + random.nextInt(16)));
            births[i] = event;
            event += 1 + random.nextInt(3);
        }
        for (int i = 0; i < n; i++) {
            deaths[i] = births[i] + 1 + random.nextInt(event - births[i] + 1);
        }
        GraphMemoryLayout layout = GraphMemoryLayout.pack(sizes, births, deaths);

        long peak = 0;
        for (int e = 0; e <= event + 1; e++) {
            long live = 0;
            for (int i = 0; i < n; i++) {
                if (births[i] <= e && e < deaths[i]) {
                    live += GraphMemoryLayout.aligned(sizes[i]);
                }
            }
            peak = Math.max(peak, live);
        }
        assertThat(layout.blockBytes()).isGreaterThanOrEqualTo(peak);
        for (int i = 0; i < n; i++) {
            assertThat(layout.offset(i) % GraphMemoryLayout.ALIGNMENT).isZero();
            assertThat(layout.size(i)).isGreaterThanOrEqualTo(sizes[i]);
            assertThat(layout.offset(i) + layout.size(i)).isLessThanOrEqualTo(layout.blockBytes());
            for (int j = i + 1; j < n; j++) {
                boolean together = births[i] < deaths[j] && births[j] < deaths[i];
                boolean overlap = layout.offset(i) < layout.offset(j) + layout.size(j)
                        && layout.offset(j) < layout.offset(i) + layout.size(i);
                assertThat(together && overlap).as("allocations %d and %d", i, j).isFalse();
            }
        }
    }

    @Test
    void rejectsSizesAndLifetimesThatCannotBe() {
        assertThatThrownBy(() -> GraphMemoryLayout.pack(new long[] {0}, new int[] {0}, new int[] {1}))
                .hasMessageContaining("size 0");
        assertThatThrownBy(() -> GraphMemoryLayout.pack(new long[] {8}, new int[] {3}, new int[] {3}))
                .hasMessageContaining("not after its birth");
    }
}
