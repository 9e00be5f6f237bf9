package io.gpupool.config;

import io.gpupool.memory.pool.DevicePool;
import io.gpupool.memory.PoolConfig;
import io.gpupool.memory.PoolTuning;
import io.gpupool.replay.SimulatedChunkSource;
import io.gpupool.replay.ReplayStream;
import org.junit.jupiter.api.Test;

import java.time.Duration;
import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class PoolMaintenanceTest {

    private static DevicePool poolReleasingAtOnce() {
        PoolConfig config = PoolConfig.defaults().apply(PoolTuning.builder().releaseIdleAge(Duration.ZERO).build());
        return new DevicePool(new SimulatedChunkSource("test", 1L << 34), config);
    }

    @Test
    void emptyChunksGoBackWithoutAnyoneCallingMaintain() throws InterruptedException {
        try (DevicePool pool = poolReleasingAtOnce()) {
            pool.allocate(30 << 20, new ReplayStream(0)).release();
            assertThat(pool.metrics().reservedBytes()).isPositive();   // before maintenance runs: it may be quick
            try (PoolMaintenance maintenance = new PoolMaintenance(List.of(pool), Duration.ofMillis(10))) {
                for (int i = 0; i < 500 && pool.metrics().reservedBytes() > 0; i++) {
                    Thread.sleep(10);
                }
                assertThat(pool.metrics().reservedBytes()).isZero();
            }
        }
    }

    @Test
    void closeStopsTheDaemonThread() throws InterruptedException {
        // other test classes' cached application contexts may run maintenance threads of their own
        List<Thread> others = maintenanceThreads();
        try (DevicePool pool = poolReleasingAtOnce()) {
            PoolMaintenance maintenance = new PoolMaintenance(List.of(pool), Duration.ofMillis(10));
            List<Thread> started = maintenanceThreads().stream().filter(t -> !others.contains(t)).toList();
            assertThat(started).hasSize(1).allMatch(Thread::isDaemon);
            maintenance.close();
            started.getFirst().join(5_000);                        // the executor terminated; its worker exits after
            assertThat(started.getFirst().isAlive()).isFalse();
        }
    }

    @Test
    void aPeriodOfZeroIsRefused() {
        assertThatThrownBy(() -> new PoolMaintenance(List.of(), Duration.ZERO)).hasMessageContaining("period = PT0S");
    }

    private static List<Thread> maintenanceThreads() {
        return Thread.getAllStackTraces().keySet().stream()
                .filter(t -> t.getName().equals("gpupool-pool-maintenance") && t.isAlive()).toList();
    }
}
