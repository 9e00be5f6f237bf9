package io.gpupool.memory.pool;

import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.fail;

class FreeStampsTest {

    /** The buddy level frees [from, to) as the largest aligned blocks that fit: every range walked, every top order. */
    @Test
    void piecesTileEachRangeWithTheLargestAlignedBlocksThatFit() {
        long pieces = 0;
        for (int top = 0; top <= 8; top++) {
            for (long from = 0; from < 260; from++) {
                for (long to = from + 1; to <= from + 260; to++) {
                    long p = from;
                    while (p < to) {
                        int k = FreeStamps.pieceOrder(p, to, top);
                        long size = 1L << k;
                        boolean larger = k < top && p % (2 * size) == 0 && p + 2 * size <= to;
                        if (k < 0 || k > top || p % size != 0 || p + size > to || larger) {
                            fail("piece at " + p + " of order " + k + " in [" + from + ", " + to + "), top " + top
                                    + ": not the largest aligned block inside the range");
                        }
                        p += size;
                        pieces++;
                    }
                }
            }
        }
        assertThat(pieces).isGreaterThan(9L * 260 * 260);
    }
}
