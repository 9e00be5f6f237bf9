package io.gpupool.memory.bestfit;

import io.gpupool.memory.DeviceBlock;
import io.gpupool.memory.OutOfDeviceMemoryException;
import io.gpupool.replay.SimulatedChunkSource;
import io.gpupool.replay.StatisticsChunkSource;
import io.gpupool.replay.ReplayStream;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.Tuple;
import net.jqwik.api.constraints.Size;

import java.util.ArrayList;
import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Random allocate/free sequences against the best-fit allocator: live blocks never overlap and are
 * aligned, the byte accounting balances after every step, and once everything is freed each chunk
 * is one free segment again (so {@code trim()} gives all of it back).
 */
class BestFitAllocatorPropertiesTest {

    private static final long MIB = 1L << 20;

    /** Positive: allocate that many bytes; negative: free the live block at index (-value - 1) mod live. */
    @Provide
    Arbitrary<List<Long>> actions() {
        Arbitrary<Long> sizes = Arbitraries.frequencyOf(
                Tuple.of(5, Arbitraries.longs().between(1, 64 * 1024)),
                Tuple.of(4, Arbitraries.longs().between(64 * 1024, 6 * MIB)),
                Tuple.of(1, Arbitraries.longs().between(6 * MIB, 20 * MIB)));
        Arbitrary<Long> frees = Arbitraries.longs().between(-1000, -1);
        return Arbitraries.frequencyOf(Tuple.of(3, sizes), Tuple.of(2, frees)).list().ofMinSize(1).ofMaxSize(300);
    }

    @Property(tries = 200)
    void liveBlocksNeverOverlapAndEverythingCoalescesBack(@ForAll("actions") @Size(max = 300) List<Long> actions,
                                                          @ForAll boolean limited) {
        StatisticsChunkSource source = new StatisticsChunkSource(new SimulatedChunkSource("prop", limited ? 48 * MIB : 1L << 40));
        BestFitAllocator allocator = new BestFitAllocator(source, 8 * MIB, false);
        List<DeviceBlock> live = new ArrayList<>();
        long requested = 0;
        for (long action : actions) {
            if (action > 0) {
                DeviceBlock block;
                try {
                    block = allocator.allocate(action, new ReplayStream((int) (action % 4)));
                } catch (OutOfDeviceMemoryException refused) {
                    assertThat(limited).as("only the limited source may refuse").isTrue();
                    continue;
                }
                assertThat(block.address() % 256).isZero();
                assertThat(block.size()).isGreaterThanOrEqualTo(action).isLessThan(action + 256);
                for (DeviceBlock other : live) {
                    boolean disjoint = block.address() + block.size() <= other.address()
                            || other.address() + other.size() <= block.address();
                    assertThat(disjoint).as("%s overlaps %s", block, other).isTrue();
                }
                live.add(block);
                requested += action;
            } else if (!live.isEmpty()) {
                DeviceBlock block = live.remove((int) ((-action - 1) % live.size()));
                requested -= block.requestedBytes();
                block.release();
            }
            assertThat(allocator.requestedBytes()).isEqualTo(requested);
            assertThat(allocator.allocatedBytes() + allocator.freeBytes()).isEqualTo(allocator.reservedBytes());
            assertThat(allocator.reservedBytes()).isEqualTo(source.reservedBytes());
        }
        live.forEach(DeviceBlock::release);
        assertThat(allocator.freeBytes()).isEqualTo(allocator.reservedBytes());
        long reserved = allocator.reservedBytes();
        assertThat(allocator.trim()).isEqualTo(reserved);
        assertThat(source.reservedBytes()).as("every chunk was one free segment again").isZero();
        allocator.close();
    }
}
