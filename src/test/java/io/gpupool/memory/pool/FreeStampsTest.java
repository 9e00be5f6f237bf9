package io.gpupool.memory.pool;

import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;

class FreeStampsTest {

    /** The buddy level frees [from, to) as the largest aligned blocks that fit: every range walked, every top order. */
    @Test
    void piecesTileEachRangeWithTheLargestAlignedBlocksThatFit() {
        for (int top = 0; top <= 8; top++) {
            for (long from = 0; from < 300; from++) {
                for (long to = from + 1; to <= from + 300; to++) {
                    long p = from;
                    while (p < to) {
                        int k = FreeStamps.pieceOrder(p, to, top);
                        long size = 1L << k;
                        String piece = "piece " + p + " of order " + k + " in [" + from + ", " + to + "), top " + top;
                        assertThat(k).as(piece).isBetween(0, top);
                        assertThat(p % size).as(piece + ": aligned").isZero();
                        assertThat(p + size).as(piece + ": inside").isLessThanOrEqualTo(to);
                        boolean larger = k < top && p % (2 * size) == 0 && p + 2 * size <= to;
                        assertThat(larger).as(piece + ": no larger aligned block fits").isFalse();
                        p += size;
                    }
                    assertThat(p).isEqualTo(to);
                }
            }
        }
    }
}
