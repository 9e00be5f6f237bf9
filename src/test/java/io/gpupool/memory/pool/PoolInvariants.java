package io.gpupool.memory.pool;

import io.gpupool.memory.DeviceBlock;

import io.gpupool.memory.metric.ChunkMetric;
import io.gpupool.memory.metric.PoolMetrics;

import java.util.ArrayList;
import java.util.Collection;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import static org.assertj.core.api.Assertions.assertThat;

/** Checks shared by the property and stress tests. */
final class PoolInvariants {

    private PoolInvariants() {
    }

    /** Live blocks are aligned, inside a live chunk of the source, and never overlap. */
    static void liveBlocksAreSound(Collection<DeviceBlock> live, FakeChunkSource source) {
        List<DeviceBlock> sorted = new ArrayList<>(live);
        sorted.sort(Comparator.comparingLong(DeviceBlock::address));
        DeviceBlock previous = null;
        for (DeviceBlock block : sorted) {
            assertThat(block.address() % 256).as("alignment of %s", block).isZero();
            assertThat(block.size()).as("size of %s", block).isGreaterThanOrEqualTo(block.requestedBytes());
            assertThat(source.contains(block.address(), block.size())).as("%s inside a live chunk", block).isTrue();
            if (previous != null) {
                assertThat(previous.address() + previous.size()).as("%s overlaps %s", previous, block)
                        .isLessThanOrEqualTo(block.address());
            }
            previous = block;
        }
    }

    /** The pool's accounting agrees with the blocks the test holds and with the source. */
    static void accountingHolds(DevicePool pool, Collection<DeviceBlock> live, FakeChunkSource source) {
        PoolMetrics metrics = pool.metrics();
        assertThat(metrics.allocatedBytes()).as("allocated").isEqualTo(live.stream().mapToLong(DeviceBlock::size).sum());
        assertThat(metrics.requestedBytes()).as("requested")
                .isEqualTo(live.stream().mapToLong(DeviceBlock::requestedBytes).sum());
        assertThat(metrics.counters().allocations() - metrics.counters().frees()).as("allocations - frees")
                .isEqualTo(live.size());
        assertThat(metrics.reservedBytes()).as("reserved = source's live bytes").isEqualTo(source.liveBytes());
        assertThat(metrics.chunks().stream().mapToLong(ChunkMetric::bytes).sum() + metrics.retainedHandleBytes())
                .as("chunks and kept physical memory sum to reserved").isEqualTo(metrics.reservedBytes());
        assertThat(metrics.globalFreeBytes() + metrics.cachedBytes()).as("free + cached fit in reserved")
                .isLessThanOrEqualTo(metrics.reservedBytes() - metrics.allocatedBytes());
    }

    /**
     * With nothing outstanding: after flushing and coalescing, each chunk's free blocks are exactly its
     * roots (the largest-first power-of-two split of its size), i.e. whole chunks again.
     */
    static void freeSpaceIsWholeChunks(DevicePool pool) {
        pool.flushAndCoalesce();
        long[][] free = pool.freeListSnapshot();
        Map<Integer, List<long[]>> byChunk = new HashMap<>();
        for (int order = 0; order < free.length; order++) {
            for (long key : free[order]) {
                byChunk.computeIfAbsent((int) (key >>> 24), id -> new ArrayList<>())
                        .add(new long[] {key & ((1L << 24) - 1), order});
            }
        }
        long unit = pool.minBlockBytes();
        long totalUnits = 0;
        int top = free.length - 1;
        for (Map.Entry<Integer, List<long[]>> entry : byChunk.entrySet()) {
            List<long[]> blocks = entry.getValue();
            blocks.sort(Comparator.comparingLong(b -> b[0]));
            long units = blocks.stream().mapToLong(b -> 1L << b[1]).sum();
            totalUnits += units;
            long offset = 0;
            int index = 0;
            for (int k = top; k >= 0; k--) {
                while (units - offset >= (1L << k)) {
                    long[] block = blocks.get(index++);
                    assertThat(block).as("chunk %d root at %d", entry.getKey(), offset).containsExactly(offset, k);
                    offset += 1L << k;
                }
            }
            assertThat(index).isEqualTo(blocks.size());
        }
        PoolMetrics metrics = pool.metrics();
        assertThat(metrics.cachedBytes()).isZero();
        long buddyBytes = metrics.addressSpaceBytes() > 0 ? metrics.addressSpaceBytes()   // MAPPED: address space
                : metrics.chunks().stream().filter(c -> !c.dedicated()).mapToLong(ChunkMetric::bytes).sum();
        assertThat(totalUnits * unit).as("all buddy space is free").isEqualTo(buddyBytes);
    }
}
