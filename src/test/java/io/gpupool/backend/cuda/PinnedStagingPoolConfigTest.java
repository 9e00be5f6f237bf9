package io.gpupool.backend.cuda;

import io.gpupool.backend.host.HostChunkSource;
import io.gpupool.memory.DeviceBlock;
import io.gpupool.memory.pool.DevicePool;
import io.gpupool.memory.PoolConfig;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import java.util.ArrayList;
import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Runs in CI: the staging pool's configuration is valid for the default and the test options, and a
 * pool so configured (over host memory instead of pinned memory) serves {@code maxSlots} slots at once
 * within its cap, with slots released from another thread than the one that took them, as the stream
 * workers do.
 */
class PinnedStagingPoolConfigTest {

    @ParameterizedTest
    @CsvSource({"4194304, 4, 32", "65536, 2, 8", "65536, 2, 4", "1048576, 1, 3"})
    void configuredPoolServesEverySlotWithinItsCap(long slotBytes, int slotsPerChunk, int maxSlots) throws Exception {
        PoolConfig config = PinnedStagingPool.poolConfig(slotBytes, slotsPerChunk, maxSlots);
        assertThat(config.capBytes()).isGreaterThanOrEqualTo(slotBytes * maxSlots);
        HostChunkSource source = new HostChunkSource(config.capBytes());
        try (DevicePool pool = new DevicePool(source, config)) {
            for (int round = 0; round < 3; round++) {
                List<DeviceBlock> slots = new ArrayList<>();
                for (int i = 0; i < maxSlots; i++) {
                    slots.add(pool.allocate(slotBytes, new PinnedStagingPool.StagingStream(i % 2)));
                }
                assertThat(slots).allSatisfy(slot -> assertThat(slot.size()).isGreaterThanOrEqualTo(slotBytes));
                assertThat(pool.metrics().reservedBytes()).isLessThanOrEqualTo(config.capBytes());
                Thread releaser = Thread.ofPlatform().start(() -> slots.forEach(DeviceBlock::release));
                releaser.join();
            }
        }
        assertThat(source.outstandingChunks()).isZero();
    }
}
