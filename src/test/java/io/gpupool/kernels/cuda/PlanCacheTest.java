package io.gpupool.kernels.cuda;

import io.gpupool.backend.DeviceStream;
import io.gpupool.backend.MatmulLibrary.Matmul;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import static org.assertj.core.api.Assertions.assertThat;

/** The per-stream plan table: every stored shape comes back, through growth, and nothing else does. */
class PlanCacheTest {

    private static Matmul plan() {
        return new Matmul() {
            @Override
            public void run(DeviceStream stream, long x, long w, long bias, long residual, long y, long workspace) {
            }

            @Override
            public void close() {
            }
        };
    }

    @Test
    void everyShapeOfAVariableWorkloadIsFoundAfterGrowth() {
        PlanCache cache = new PlanCache();
        Map<Long, Matmul> expected = new HashMap<>();
        for (int rows = 1; rows <= 512 * 32; rows += 37) {
            for (int[] shape : new int[][] {{768, 2304}, {768, 768}, {768, 3072}, {3072, 768}}) {
                for (int epilogue = 0; epilogue < 3; epilogue++) {
                    long key = ((long) rows << 40) | ((long) shape[0] << 24) | ((long) shape[1] << 8) | epilogue;
                    Matmul plan = plan();
                    cache.put(key, plan);
                    expected.put(key, plan);
                }
            }
        }
        assertThat(cache.size()).isEqualTo(expected.size());
        expected.forEach((key, plan) -> assertThat(cache.get(key)).isSameAs(plan));
        assertThat(cache.get((7L << 40) | (768L << 24) | (768L << 8))).isNull();
        List<Matmul> visited = new ArrayList<>();
        cache.forEach(visited::add);
        assertThat(visited).containsExactlyInAnyOrderElementsOf(expected.values());
    }
}
