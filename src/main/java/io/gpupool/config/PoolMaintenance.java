package io.gpupool.config;

import io.gpupool.memory.DeviceAllocator;
import io.gpupool.memory.pool.DevicePool;
import io.gpupool.serving.DeviceRuntime;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

/**
 * Calls {@link DevicePool#maintain()} on every pool of the served devices at a fixed period (idle
 * local classes flushed, idle empty chunks and cached dedicated chunks returned to the device). The
 * pool runs nothing in the background itself; this is its owner's periodic call.
 *
 * <p>One daemon thread, owned by the configuration; {@link #close()} stops it and waits for a run
 * in progress. A pool that throws is logged and tried again next period.
 */
public final class PoolMaintenance implements AutoCloseable {

    private static final Logger log = LoggerFactory.getLogger(PoolMaintenance.class);

    private final List<DevicePool> pools;
    private final DaemonTimer timer;

    /** Starts calling {@code maintain()} on {@code pools} every {@code period}. */
    public PoolMaintenance(List<DevicePool> pools, Duration period) {
        if (period.isNegative() || period.isZero()) {
            throw new IllegalArgumentException("period = " + period + " is invalid; allowed: > 0");
        }
        this.pools = List.copyOf(pools);
        this.timer = new DaemonTimer("gpupool-pool-maintenance", period.toNanos(), this::runOnce);
    }

    /** {@code gpupool.memory.maintenance-interval}, validated: 10 ms to 1 min. */
    static Duration interval(Duration configured) {
        if (configured == null || configured.compareTo(Duration.ofMillis(10)) < 0
                || configured.compareTo(Duration.ofMinutes(1)) > 0) {
            throw new IllegalArgumentException("gpupool.memory.maintenance-interval = "
                    + (configured == null ? "null" : configured.toMillis() + "ms") + " is invalid; allowed: 10ms to 1m");
        }
        return configured;
    }

    /** The pools behind the devices' activation and weight allocators (behind a trace recorder, too). */
    public static List<DevicePool> poolsOf(List<DeviceRuntime> runtimes) {
        List<DevicePool> pools = new ArrayList<>();
        for (DeviceRuntime runtime : runtimes) {
            for (DeviceAllocator allocator : List.of(runtime.allocator(), runtime.weightsAllocator())) {
                allocator.capability(DevicePool.class).filter(pool -> !pools.contains(pool)).ifPresent(pools::add);
            }
        }
        return pools;
    }

    private void runOnce() {
        for (DevicePool pool : pools) {
            try {
                pool.maintain();
            } catch (RuntimeException e) {
                log.warn("maintain() of the pool on {} failed; retried next period", pool.metrics().name(), e);
            }
        }
    }

    @Override
    public void close() {
        timer.close();
    }
}
