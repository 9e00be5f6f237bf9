package io.gpupool.replay;

import io.gpupool.memory.OutOfDeviceMemoryException;
import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class StatisticsChunkSourceTest {

    private static final long MIB = 1L << 20;

    @Test
    void countsChunksBytesAndPeak() {
        StatisticsChunkSource stats = new StatisticsChunkSource(new SimulatedChunkSource("dev", 64 * MIB));
        long a = stats.allocate(4 * MIB);
        long b = stats.allocate(8 * MIB);
        assertThat(stats.reservedBytes()).isEqualTo(12 * MIB);
        assertThat(stats.reservedChunks()).isEqualTo(2);
        stats.free(b, 8 * MIB);
        assertThat(stats.reservedBytes()).isEqualTo(4 * MIB);
        assertThat(stats.peakReservedBytes()).isEqualTo(12 * MIB);
        stats.resetPeak();
        assertThat(stats.peakReservedBytes()).isEqualTo(4 * MIB);
        stats.free(a, 4 * MIB);
        assertThat(stats.allocations()).isEqualTo(2);
        assertThat(stats.frees()).isEqualTo(2);
        assertThat(stats.reservedChunks()).isZero();
        assertThat(stats.allocateNanos()).isPositive();
        assertThat(stats.allocateLatency().count()).isEqualTo(2);
        assertThat(stats.allocateLatency().percentileNanos(1.0)).isGreaterThanOrEqualTo(stats.maxAllocateNanos());
    }

    @Test
    void aRefusedAllocationCountsAsAFailureAndReservesNothing() {
        StatisticsChunkSource stats = new StatisticsChunkSource(new SimulatedChunkSource("dev", 4 * MIB));
        assertThatThrownBy(() -> stats.allocate(8 * MIB)).isInstanceOf(OutOfDeviceMemoryException.class);
        assertThat(stats.failures()).isEqualTo(1);
        assertThat(stats.allocations()).isZero();
        assertThat(stats.reservedBytes()).isZero();
        assertThat(stats.peakReservedBytes()).isZero();
    }
}
