package io.gpupool.memory.pool;

import io.gpupool.memory.PoolConfig;
import io.gpupool.memory.bestfit.BestFitAllocator;
import io.gpupool.memory.trace.TracingAllocator;
import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;

/** Wiring finds the pool and the trace recorder by capability, whatever wraps what. */
class DevicePoolCapabilityTest {

    @Test
    void thePoolIsFoundBehindATraceRecorderAndTheRecorderInFront() {
        try (DevicePool pool = new DevicePool(new FakeChunkSource(1L << 32), PoolConfig.defaults())) {
            TracingAllocator traced = new TracingAllocator(pool, 16);
            assertThat(((io.gpupool.memory.DeviceAllocator) traced).capability(DevicePool.class)).containsSame(pool);
            assertThat(traced.capability(TracingAllocator.class)).containsSame(traced);
            assertThat(pool.capability(DevicePool.class)).containsSame(pool);
            assertThat(pool.capability(TracingAllocator.class)).isEmpty();
            assertThat(traced.capability(BestFitAllocator.class)).isEmpty();
        }
    }
}
