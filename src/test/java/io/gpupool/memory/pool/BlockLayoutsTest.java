package io.gpupool.memory.pool;

import io.gpupool.memory.DeviceBlock;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.List;

import io.gpupool.memory.metric.BlockLayoutMetric;
import io.gpupool.memory.metric.BlockLayoutMetric.Block;
import io.gpupool.memory.metric.BlockLayoutMetric.BlockState;
import org.junit.jupiter.api.Test;

/** The operators' buddy map of a quiet pool: every state shows where the pool put it. */
class BlockLayoutsTest {

    static final long MIB = 1L << 20;

    @Test
    void aQuietPoolShowsAllocatedCachedSplitAndFreeBlocksCoveringEachChunkExactly() {
        FakeChunkSource source = new FakeChunkSource(4L << 30);
        TestStream stream = new TestStream(0);
        try (DevicePool pool = new DevicePool(source, DevicePoolTest.lazy256())) {
            DeviceBlock big = pool.allocate(10 * MIB, stream);        // 10 MiB run: 8 + 2 after tail trimming
            DeviceBlock cached = pool.allocate(4 * MIB, stream);
            DeviceBlock tiny = pool.allocate(1000, stream);            // a small object: its slab is split
            cached.release();                                          // into the stream's local cache

            List<BlockLayoutMetric.ChunkBlocks> layout = ((BlockLayoutMetric) pool.metrics()).layout();

            assertThat(layout).hasSize(1);
            BlockLayoutMetric.ChunkBlocks chunk = layout.getFirst();
            long covered = 0;
            for (Block block : chunk.blocks()) {
                assertThat(block.offset()).isEqualTo(covered);                     // in order, no gap, no overlap
                assertThat(Long.bitCount(block.bytes())).isEqualTo(1);             // buddy blocks
                assertThat(block.offset() % block.bytes()).isZero();               // aligned to their size
                covered += block.bytes();
            }
            assertThat(covered).isEqualTo(chunk.bytes());
            assertThat(bytesIn(chunk, BlockState.ALLOCATED)).isEqualTo(10 * MIB);
            assertThat(bytesIn(chunk, BlockState.CACHED)).isEqualTo(4 * MIB);
            assertThat(bytesIn(chunk, BlockState.SPLIT)).isEqualTo(pool.config().minBlockBytes());
            assertThat(bytesIn(chunk, BlockState.FREE)).isEqualTo(pool.metrics().globalFreeBytes());
            tiny.release();
            big.release();
        }
    }

    private static long bytesIn(BlockLayoutMetric.ChunkBlocks chunk, BlockState state) {
        return chunk.blocks().stream().filter(b -> b.state() == state).mapToLong(Block::bytes).sum();
    }
}
