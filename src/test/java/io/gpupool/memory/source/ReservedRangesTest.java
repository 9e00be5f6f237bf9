package io.gpupool.memory.source;

import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/** The shared bookkeeping of mapping sources refuses every misuse with a message naming it. */
class ReservedRangesTest {

    private static final long MIB = 1L << 20;
    private static final long BASE = 1L << 40;

    private final ReservedRanges ranges = new ReservedRanges("test-source", 2 * MIB);

    @Test
    void mapsAndUnmapsGranulesInsideAReservedRange() {
        ranges.add(BASE, 64 * MIB);
        ranges.markMapped(BASE + 4 * MIB, 8 * MIB);
        ranges.markMapped(BASE, 4 * MIB);                       // next to it: fine
        ranges.markUnmapped(BASE, 12 * MIB);
        ranges.remove(BASE, 64 * MIB);
        assertThat(ranges.count()).isZero();
    }

    @Test
    void refusesToMapAGranuleTwice() {
        ranges.add(BASE, 64 * MIB);
        ranges.markMapped(BASE, 4 * MIB);
        assertThatThrownBy(() -> ranges.markMapped(BASE + 2 * MIB, 4 * MIB))
                .isInstanceOf(IllegalStateException.class)
                .hasMessageContaining("test-source").hasMessageContaining("0x10000200000 is already mapped");
        ranges.markUnmapped(BASE, 4 * MIB);                     // the refused map changed nothing
        ranges.markMapped(BASE + 2 * MIB, 4 * MIB);
    }

    @Test
    void refusesToUnmapWhatIsNotMapped() {
        ranges.add(BASE, 64 * MIB);
        ranges.markMapped(BASE, 2 * MIB);
        assertThatThrownBy(() -> ranges.markUnmapped(BASE, 4 * MIB))
                .isInstanceOf(IllegalStateException.class).hasMessageContaining("0x10000200000 is not mapped");
        ranges.markUnmapped(BASE, 2 * MIB);                     // still mapped after the refusal
    }

    @Test
    void refusesCallsOutsideOneRangeOrOffTheGranule() {
        ranges.add(BASE, 8 * MIB);
        assertThatThrownBy(() -> ranges.markMapped(BASE + 6 * MIB, 4 * MIB))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("not inside one reserved range");
        assertThatThrownBy(() -> ranges.markMapped(BASE - 2 * MIB, 2 * MIB))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("not inside one reserved range");
        assertThatThrownBy(() -> ranges.markMapped(BASE + MIB, 2 * MIB))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("positive multiples of 2 MiB");
        assertThatThrownBy(() -> ranges.markMapped(BASE, 0))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("positive multiples of 2 MiB");
    }

    @Test
    void refusesToReleaseARangeWithMappedGranulesOrOneItDoesNotKnow() {
        ranges.add(BASE, 8 * MIB);
        ranges.markMapped(BASE + 2 * MIB, 4 * MIB);
        assertThatThrownBy(() -> ranges.remove(BASE, 8 * MIB))
                .isInstanceOf(IllegalStateException.class).hasMessageContaining("2 granule(s) of 2 MiB are still mapped");
        assertThatThrownBy(() -> ranges.remove(BASE, 16 * MIB))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("matches no reserved range");
        assertThat(ranges.count()).isEqualTo(1);
    }
}
