package io.gpupool.memory.pool;

import io.gpupool.memory.DeviceBlock;
import io.gpupool.memory.PoolConfig;
import io.gpupool.memory.PoolTuning;
import io.gpupool.memory.metric.AllocatorMode;
import org.junit.jupiter.api.Test;

import static io.gpupool.memory.PoolConfig.GIB;
import static io.gpupool.memory.PoolConfig.MIB;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/** MAPPED growth with {@link PoolConfig#mappedExtentBytes()} larger than a unit: the default 8 MiB extents of small chunks. */
class MappedExtentsTest {

    private final FakeChunkSource source = new FakeChunkSource(8 * GIB, true);
    private final TestStream stream = new TestStream(0);

    private static PoolConfig globalOnly() {
        return PoolConfig.defaults().withMode(AllocatorMode.GLOBAL_ONLY);
    }

    @Test
    void aRunMapsOnePhysicalAllocationPerExtentItTouches() {
        assertThat(PoolConfig.defaults().mappedExtentBytes()).isEqualTo(8 * MIB);
        try (DevicePool pool = new DevicePool(source, globalOnly())) {
            DeviceBlock block = pool.allocate(40 * MIB, stream);
            assertThat(pool.metrics().physicalCreates()).as("five 8 MiB extents, not twenty 2 MiB units").isEqualTo(5);
            assertThat(source.mapped(block.address(), 40 * MIB)).isTrue();
            block.release();
        }
        try (DevicePool pool = new DevicePool(source, GranuleExtents.defaults().withMode(AllocatorMode.GLOBAL_ONLY))) {
            pool.allocate(40 * MIB, stream).release();
            assertThat(pool.metrics().physicalCreates()).as("2 MiB extents: one per unit").isEqualTo(20);
        }
    }

    @Test
    void aNeighbourInTheSameExtentNeedsNoMap() {
        try (DevicePool pool = new DevicePool(source, globalOnly())) {
            DeviceBlock first = pool.allocate(2 * MIB, stream);
            assertThat(pool.metrics().reservedBytes()).as("the whole extent under a 2 MiB run").isEqualTo(8 * MIB);
            long maps = pool.metrics().mapCalls();
            DeviceBlock second = pool.allocate(2 * MIB, stream);
            assertThat(pool.metrics().mapCalls()).as("the neighbour's units are mapped already").isEqualTo(maps);
            assertThat(pool.metrics().reservedBytes()).isEqualTo(8 * MIB);
            first.release();
            second.release();
        }
    }

    @Test
    void freeMemoryUnmapsInWholeExtentsOnly() {
        try (DevicePool pool = new DevicePool(source, globalOnly())) {
            DeviceBlock kept = pool.allocate(2 * MIB, stream);
            DeviceBlock freed = pool.allocate(2 * MIB, stream);
            DeviceBlock other = pool.allocate(8 * MIB, stream);
            assertThat(pool.metrics().reservedBytes()).isEqualTo(16 * MIB);
            freed.release();
            other.release();
            pool.trim();
            assertThat(pool.metrics().reservedBytes()).as("the extent a live block shares stays mapped whole")
                    .isEqualTo(8 * MIB);
            assertThat(source.mapped(kept.address(), 8 * MIB)).isTrue();
            kept.release();
            pool.trim();
            assertThat(pool.metrics().reservedBytes()).isZero();
            assertThat(source.mappedGranules()).isZero();
        }
    }

    @Test
    void aSmallCapNarrowsTheExtentToAnEighthOfIt() {
        PoolConfig capped = globalOnly().apply(PoolTuning.builder().capBytes(16 * MIB).build());
        try (DevicePool pool = new DevicePool(source, capped)) {
            DeviceBlock block = pool.allocate(2 * MIB, stream);
            assertThat(pool.metrics().reservedBytes()).as("2 MiB extents under a 16 MiB cap").isEqualTo(2 * MIB);
            block.release();
        }
    }

    @Test
    void anExtentIsAPowerOfTwoFromTheMinimumBlockTo16MiB() {
        assertThatThrownBy(() -> PoolConfig.defaults().withMappedExtentBytes(3 * MIB))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessage("gpupool.memory.mappedExtentBytes = 3145728 is invalid; allowed: a power of two in [2097152, 16777216]");
        assertThatThrownBy(() -> PoolConfig.defaults().withMappedExtentBytes(32 * MIB))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("mappedExtentBytes");
        assertThat(PoolConfig.defaults().withBlocks(32 * MIB, 256 * MIB).mappedExtentBytes())
                .as("raised with the minimum block").isEqualTo(32 * MIB);
    }
}
