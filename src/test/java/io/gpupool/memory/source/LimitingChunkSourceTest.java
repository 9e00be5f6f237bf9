package io.gpupool.memory.source;

import io.gpupool.memory.OutOfDeviceMemoryException;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class LimitingChunkSourceTest {

    private static final long MIB = 1L << 20;
    private final SimulatedChunkSource device = new SimulatedChunkSource("dev", 1024 * MIB);

    @Test
    void refusesWhatWouldExceedTheCapAndNamesTheNumbers() {
        LimitingChunkSource limited = LimitingChunkSource.ofBytes(device, 6 * MIB);
        limited.allocate(4 * MIB);
        assertThatThrownBy(() -> limited.allocate(4 * MIB))
                .isInstanceOf(OutOfDeviceMemoryException.class)
                .hasMessageContaining("4194304").hasMessageContaining("6291456");
        assertThat(limited.reservedBytes()).isEqualTo(4 * MIB);
        assertThat(device.reservedBytes()).isEqualTo(4 * MIB);
        limited.allocate(2 * MIB); // exactly at the cap is allowed
    }

    @Test
    void rollsBackItsClaimWhenTheUpstreamFails() {
        FaultInjectingChunkSource faulty = new FaultInjectingChunkSource(device).failOnCall(2);
        LimitingChunkSource limited = LimitingChunkSource.ofBytes(faulty, 8 * MIB);
        limited.allocate(4 * MIB);
        assertThatThrownBy(() -> limited.allocate(4 * MIB)).isInstanceOf(OutOfDeviceMemoryException.class)
                .hasMessageContaining("injected");
        assertThat(limited.reservedBytes()).isEqualTo(4 * MIB);
        limited.allocate(4 * MIB); // the failed claim did not eat the headroom
    }

    @Test
    void aFractionIsResolvedAgainstTheUpstreamCapacityAndTheCapCanChangeAtRuntime() {
        LimitingChunkSource limited = LimitingChunkSource.ofFraction(device, 0.25);
        assertThat(limited.limitBytes()).isEqualTo(256 * MIB);
        long a = limited.allocate(200 * MIB);
        limited.setLimitBytes(100 * MIB); // below what is held: nothing is taken back, new requests refused
        assertThatThrownBy(() -> limited.allocate(2 * MIB)).isInstanceOf(OutOfDeviceMemoryException.class);
        limited.free(a, 200 * MIB);
        limited.allocate(100 * MIB);
        limited.setLimitFraction(1.0);
        limited.allocate(500 * MIB);
    }

    @Test
    void invalidCapsAreRejectedWithTheValue() {
        assertThatThrownBy(() -> LimitingChunkSource.ofBytes(device, 0)).hasMessageContaining("limitBytes")
                .hasMessageContaining("0");
        assertThatThrownBy(() -> LimitingChunkSource.ofFraction(device, 1.5)).hasMessageContaining("(0, 1]")
                .hasMessageContaining("1.5");
        assertThatThrownBy(() -> LimitingChunkSource.ofFraction(device, Double.NaN))
                .isInstanceOf(IllegalArgumentException.class);
    }

    @Test
    void concurrentCallersNeverPushTheUpstreamBeyondTheCap() throws Exception {
        StatisticsChunkSource upstream = new StatisticsChunkSource(device);
        LimitingChunkSource limited = LimitingChunkSource.ofBytes(upstream, 20 * MIB);
        ExecutorService pool = Executors.newFixedThreadPool(4);
        try {
            List<Future<?>> futures = new ArrayList<>();
            for (int t = 0; t < 4; t++) {
                futures.add(pool.submit(() -> {
                    for (int i = 0; i < 2000; i++) {
                        try {
                            long a = limited.allocate(6 * MIB);
                            limited.free(a, 6 * MIB);
                        } catch (OutOfDeviceMemoryException expected) {
                            // contention near the cap
                        }
                    }
                    return null;
                }));
            }
            for (Future<?> f : futures) {
                f.get();
            }
        } finally {
            pool.shutdownNow();
        }
        assertThat(upstream.peakReservedBytes()).isLessThanOrEqualTo(20 * MIB);
        assertThat(limited.reservedBytes()).isZero();
    }
}
