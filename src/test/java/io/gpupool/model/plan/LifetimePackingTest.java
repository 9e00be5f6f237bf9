package io.gpupool.model.plan;

import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Combinators;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.Tuple;
import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/** Placement of buffers with lifetimes: never two live buffers in one byte, never below the peak. */
class LifetimePackingTest {

    private static final long K = 1024;

    /** The class comment's picture: a 2K [0, 2), b 4K [1, 3), c 1K [2, 4), d 256 B [0, 4). */
    @Test
    void theClassCommentsExamplePacksToItsPeak() {
        LifetimePacking p = LifetimePacking.pack(new long[]{2 * K, 4 * K, K, 256}, new int[]{0, 1, 2, 0},
                new int[]{2, 3, 4, 4});
        assertThat(p.offset(1)).isZero();
        assertThat(p.offset(0)).isEqualTo(4 * K);
        assertThat(p.offset(2)).as("c takes a's bytes").isEqualTo(4 * K);
        assertThat(p.offset(3)).isEqualTo(6 * K);
        assertThat(p.blockBytes()).isEqualTo(6 * K + 256).isEqualTo(peak(p, new int[]{0, 1, 2, 0}, new int[]{2, 3, 4, 4}));
    }

    @Test
    void buffersOfNoBytesAreNotPlacedAndSizesAreRoundedTo256() {
        LifetimePacking p = LifetimePacking.pack(new long[]{0, 1, 300}, new int[]{0, 0, 0}, new int[]{1, 1, 1});
        assertThat(p.size(0)).isZero();
        assertThat(p.size(1)).isEqualTo(256);
        assertThat(p.size(2)).isEqualTo(512);
        assertThat(p.blockBytes()).isEqualTo(768);
        assertThat(LifetimePacking.pack(new long[0], new int[0], new int[0]).blockBytes()).isZero();
    }

    @Test
    void badInputIsRefusedNamingTheBuffer() {
        assertThatThrownBy(() -> LifetimePacking.pack(new long[]{-1}, new int[]{0}, new int[]{1}))
                .hasMessageContaining("buffer 0 has size -1");
        assertThatThrownBy(() -> LifetimePacking.pack(new long[]{8}, new int[]{3}, new int[]{3}))
                .hasMessageContaining("buffer 0 lives over [3, 3)");
        assertThatThrownBy(() -> LifetimePacking.pack(new long[]{8}, new int[]{0, 1}, new int[]{1}))
                .hasMessageContaining("differ in length");
    }

    record Buffers(long[] sizes, int[] from, int[] to) {
    }

    @Provide
    Arbitrary<Buffers> buffers() {
        Arbitrary<Long> size = Arbitraries.frequencyOf(
                Tuple.of(1, Arbitraries.just(0L)),
                Tuple.of(5, Arbitraries.longs().between(1, 64 * K)),
                Tuple.of(3, Arbitraries.longs().between(64 * K, 16 * K * K)),
                Tuple.of(1, Arbitraries.longs().between(16 * K * K, 100 * K * K)));
        Arbitrary<int[]> life = Combinators.combine(Arbitraries.integers().between(0, 60),
                Arbitraries.integers().between(1, 20)).as((from, length) -> new int[]{from, from + length});
        return Combinators.combine(size, life).as(Tuple::of).list().ofMinSize(0).ofMaxSize(120).map(list -> {
            long[] sizes = new long[list.size()];
            int[] from = new int[list.size()];
            int[] to = new int[list.size()];
            for (int i = 0; i < list.size(); i++) {
                sizes[i] = list.get(i).get1();
                from[i] = list.get(i).get2()[0];
                to[i] = list.get(i).get2()[1];
            }
            return new Buffers(sizes, from, to);
        });
    }

    @Property(tries = 300)
    void buffersAliveTogetherNeverShareAByteAndTheBlockHoldsAtLeastThePeak(@ForAll("buffers") Buffers b) {
        LifetimePacking p = LifetimePacking.pack(b.sizes(), b.from(), b.to());
        int n = b.sizes().length;
        for (int i = 0; i < n; i++) {
            assertThat(p.size(i)).isGreaterThanOrEqualTo(b.sizes()[i]).isLessThan(b.sizes()[i] + 256);
            assertThat(p.offset(i) % 256).isZero();
            assertThat(p.offset(i) + p.size(i)).isLessThanOrEqualTo(p.blockBytes());
            for (int j = i + 1; j < n; j++) {
                boolean together = b.from()[i] < b.to()[j] && b.from()[j] < b.to()[i];
                boolean apart = p.offset(i) + p.size(i) <= p.offset(j) || p.offset(j) + p.size(j) <= p.offset(i);
                if (together && p.size(i) > 0 && p.size(j) > 0) {
                    assertThat(apart).as("buffers %d and %d are alive together", i, j).isTrue();
                }
            }
        }
        assertThat(p.blockBytes()).isGreaterThanOrEqualTo(peak(p, b.from(), b.to()));
        LifetimePacking again = LifetimePacking.pack(b.sizes(), b.from(), b.to());
        for (int i = 0; i < n; i++) {
            assertThat(again.offset(i)).as("the same input packs the same way").isEqualTo(p.offset(i));
        }
    }

    @Test
    void aChainOfBuffersEachAliveBesideItsSuccessorPacksToItsPeak() {
        // x0 -> x1 -> ... : x(i) lives over [i, i + 2), so two neighbours are alive at each instant.
        long[] sizes = {3 * K, 5 * K, 2 * K, 7 * K, K, 4 * K};
        int[] from = new int[sizes.length];
        int[] to = new int[sizes.length];
        for (int i = 0; i < sizes.length; i++) {
            from[i] = i;
            to[i] = i + 2;
        }
        LifetimePacking p = LifetimePacking.pack(sizes, from, to);
        assertThat(p.blockBytes()).isEqualTo(peak(p, from, to)).isEqualTo(9 * K);
    }

    /** Largest sum of rounded sizes alive at one instant. */
    static long peak(LifetimePacking p, int[] from, int[] to) {
        long peak = 0;
        int end = 0;
        for (int t : to) {
            end = Math.max(end, t);
        }
        for (int instant = 0; instant < end; instant++) {
            long live = 0;
            for (int i = 0; i < p.count(); i++) {
                if (from[i] <= instant && instant < to[i]) {
                    live += p.size(i);
                }
            }
            peak = Math.max(peak, live);
        }
        return peak;
    }
}
