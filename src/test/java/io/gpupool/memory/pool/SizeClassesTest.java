package io.gpupool.memory.pool;

import io.gpupool.memory.PoolConfig;

import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;

class SizeClassesTest {

    private final SizeClasses classes = new SizeClasses(2 * PoolConfig.MIB);

    @Test
    void everyIndexMatchesTheFormulaAndRoundTrips() {
        assertThat(classes.count()).isEqualTo(87);   // 8 linear + 9 full groups + 7 of the last group
        long previous = 0;
        for (int i = 0; i < classes.count(); i++) {
            long size = classes.size(i);
            long expected = i < 8 ? 256L * (i + 1)
                    : (1L << (11 + (i - 8) / 8)) + ((long) ((i - 8) % 8 + 1) << (11 + (i - 8) / 8 - 3));
            assertThat(size).as("class %d", i).isEqualTo(expected).isEqualTo(SizeClasses.formula(i));
            assertThat(size % 256).as("class %d is 256-aligned", i).isZero();
            assertThat(size).isGreaterThan(previous).isLessThan(2 * PoolConfig.MIB);
            assertThat(classes.indexOf(size)).as("indexOf(size(%d))", i).isEqualTo(i);
            assertThat(classes.indexOf(previous + 1)).as("indexOf(size(%d - 1) + 1)", i).isEqualTo(i);
            if (size > 2048) {
                // worst request of this class is one byte above the previous class
                double waste = (double) (size - (previous + 1)) / (previous + 1);
                assertThat(waste).as("rounding waste of class %d", i).isLessThan(0.125);
            } else {
                assertThat(size - (previous + 1)).isLessThan(256);
            }
            previous = size;
        }
        assertThat(classes.indexOf(previous + 1)).as("above the largest class: a minimum block").isEqualTo(-1);
    }

    @Test
    void slabsWasteAtMostOneSixteenthWhereEightBlocksAllowIt() {
        long block = 2 * PoolConfig.MIB;
        for (int i = 0; i < classes.count(); i++) {
            long slab = classes.slabBlocks(i) * block;
            assertThat(classes.objectsPerSlab(i)).isPositive();
            double waste = (double) (slab - classes.objectsPerSlab(i) * classes.size(i)) / slab;
            assertThat(waste).as("slab waste of class %d (%d bytes, %d blocks)", i, classes.size(i),
                    classes.slabBlocks(i)).isLessThanOrEqualTo(1.0 / 16);
        }
        // 1.25 MiB objects would waste 37.5 % of one 2 MiB block; two blocks hold three (6.25 % waste)
        int index = classes.indexOf(1280 * PoolConfig.KIB);
        assertThat(classes.slabBlocks(index)).isEqualTo(2);
        assertThat(classes.objectsPerSlab(index)).isEqualTo(3);
    }
}
