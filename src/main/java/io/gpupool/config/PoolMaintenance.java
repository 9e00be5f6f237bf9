package io.gpupool.config;

import io.gpupool.memory.DeviceAllocator;
import io.gpupool.memory.pool.DevicePool;
import io.gpupool.serving.DeviceRuntime;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;

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
    private final ScheduledExecutorService timer;

    /** Starts calling {@code maintain()} on {@code pools} every {@code period}. */
    public PoolMaintenance(List<DevicePool> pools, Duration period) {
        if (period.isNegative() || period.isZero()) {
            throw new IllegalArgumentException("period = " + period + " is invalid; allowed: > 0");
        }
        this.pools = List.copyOf(pools);
        this.timer = Executors.newSingleThreadScheduledExecutor(runnable -> {
            Thread thread = new Thread(runnable, "gpupool-pool-maintenance");
            thread.setDaemon(true);
            return thread;
        });
        long nanos = period.toNanos();
        timer.scheduleWithFixedDelay(this::runOnce, nanos, nanos, TimeUnit.NANOSECONDS);
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
        timer.shutdown();
        try {
            if (!timer.awaitTermination(10, TimeUnit.SECONDS)) {
                timer.shutdownNow();
            }
        } catch (InterruptedException e) {
            timer.shutdownNow();
            Thread.currentThread().interrupt();
        }
    }
}
