package io.gpupool.bench;

import io.gpupool.memory.AllocatorMode;
import io.gpupool.memory.DeviceAllocator;
import io.gpupool.memory.DevicePool;
import io.gpupool.memory.PoolConfig;
import io.gpupool.memory.bestfit.BestFitAllocator;
import io.gpupool.memory.source.SimulatedChunkSource;

/**
 * The allocators the benchmarks compare, by the names used in {@code @Param}. All run over a
 * {@link SimulatedChunkSource} (no memory behind the addresses): the benchmarks measure the
 * allocators' bookkeeping, not the device.
 *
 * <p>{@code best-fit} is also the single-lock baseline: one lock around every allocate and free.
 */
final class BenchAllocators {

    static final long DEVICE_BYTES = 141L << 30;

    private BenchAllocators() {
    }

    static DeviceAllocator create(String name) {
        SimulatedChunkSource device = new SimulatedChunkSource("bench", DEVICE_BYTES);
        return switch (name) {
            case "two-level" -> new DevicePool(device, PoolConfig.defaults());
            case "global-only" -> new DevicePool(device, PoolConfig.defaults().withMode(AllocatorMode.GLOBAL_ONLY));
            case "best-fit" -> new BestFitAllocator(device, 256L << 20, false);
            default -> throw new IllegalArgumentException("unknown allocator '" + name + "'");
        };
    }
}
