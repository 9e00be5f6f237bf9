package io.gpupool.lab;

import io.gpupool.memory.AllocationStream;
import io.gpupool.memory.DeviceBlock;
import io.gpupool.memory.metric.AllocatorMode;
import io.gpupool.memory.DeviceAllocator;
import io.gpupool.memory.pool.DevicePool;
import io.gpupool.memory.PoolConfig;
import io.gpupool.memory.bestfit.BestFitAllocator;
import io.gpupool.replay.SimulatedChunkSource;

/**
 * The allocators the benchmarks compare, by the names used in {@code @Param}. All run over a
 * {@link SimulatedChunkSource} (no memory behind the addresses): the benchmarks measure the
 * allocators' bookkeeping, not the device.
 *
 * <p>{@code best-fit} is also the single-lock baseline: one lock around every allocate and free.
 */
final class BenchAllocators {

    static final long DEVICE_BYTES = 141L << 30;
    /**
     * Bytes the benchmarks keep allocated in the background (as a server keeps its tensors), in
     * {@link #LIVE_BLOCK} blocks. The pool sizes a stream's local cache from the live bytes (under
     * ON_DEMAND growth: 1/8 of them spread over the streams, and a block above a quarter of that cap
     * is not cached), so with almost nothing live a 4 MiB block skips the local level entirely.
     */
    static final long LIVE_BYTES = 4L << 30;
    static final long LIVE_BLOCK = 256L << 20;

    private BenchAllocators() {
    }

    /** Allocates {@link #LIVE_BYTES} on {@code stream}; release them with {@link #release}. */
    static java.util.List<io.gpupool.memory.DeviceBlock> holdLive(DeviceAllocator allocator,
                                                                  io.gpupool.memory.AllocationStream stream) {
        java.util.List<io.gpupool.memory.DeviceBlock> live = new java.util.ArrayList<>();
        for (long held = 0; held < LIVE_BYTES; held += LIVE_BLOCK) {
            live.add(allocator.allocate(LIVE_BLOCK, stream));
        }
        return live;
    }

    static void release(java.util.List<io.gpupool.memory.DeviceBlock> live) {
        live.forEach(io.gpupool.memory.DeviceBlock::release);
        live.clear();
    }

    /**
     * One allocate and release of {@code bytes} on {@code stream}: the pair the pair benches time. Returns the
     * block's address, so that the JIT cannot drop the allocation.
     */
    static long pair(DeviceAllocator allocator, long bytes, AllocationStream stream) {
        DeviceBlock block = allocator.allocate(bytes, stream);
        long address = block.address();
        block.release();
        return address;
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
