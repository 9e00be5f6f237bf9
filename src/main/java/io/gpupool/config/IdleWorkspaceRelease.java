package io.gpupool.config;

import io.gpupool.serving.DeviceWorker;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * Gives the kernels' per-stream workspaces back to the pool once a device has had no request for
 * {@code gpupool.kernels.workspace-release-after-idle} ({@link DeviceWorker#releaseIdleWorkspaces()}); they
 * are taken again by the next product. So an idle server's pool holds nothing a request left behind, and
 * the pool's own maintenance can then return the memory to the device.
 *
 * <p>One daemon thread looks every quarter of the idle period (at most once a second); a device is
 * released from once per idle spell, since its workspaces stay released until a request takes one.
 * {@link #close()} stops the thread before the devices close (this bean depends on them). Without an
 * idle period nothing runs: the workspaces are then given back on a trim and at shutdown only.
 */
public final class IdleWorkspaceRelease implements AutoCloseable {

    private static final Logger log = LoggerFactory.getLogger(IdleWorkspaceRelease.class);

    private final List<DeviceWorker> workers;
    private final long idleNanos;
    private final DaemonTimer timer;

    /** Releases the workspaces of {@code workers} idle for {@code idle}; zero: never (no thread). */
    public IdleWorkspaceRelease(List<DeviceWorker> workers, Duration idle) {
        if (idle.isNegative()) {
            throw new IllegalArgumentException("gpupool.kernels.workspace-release-after-idle = " + idle
                    + " is invalid; allowed: >= 0 (0: only on a trim)");
        }
        this.workers = List.copyOf(workers);
        this.idleNanos = idle.toNanos();
        if (idle.isZero()) {
            this.timer = null;
            return;
        }
        long period = Math.min(TimeUnit.SECONDS.toNanos(1), Math.max(idleNanos / 4, TimeUnit.MILLISECONDS.toNanos(10)));
        this.timer = new DaemonTimer("gpupool-workspace-release", period, this::runOnce);
    }

    private void runOnce() {
        for (DeviceWorker worker : workers) {
            if (worker.idleNanos() < idleNanos) {
                continue;
            }
            try {
                long bytes = worker.releaseIdleWorkspaces();
                if (bytes > 0) {
                    log.debug("Device {} idle: {} bytes of stream workspaces back to its pool", worker.device().index(),
                            bytes);
                }
            } catch (RuntimeException e) {
                log.warn("Releasing the idle stream workspaces of device {} failed; retried next period",
                        worker.device().index(), e);
            }
        }
    }

    @Override
    public void close() {
        if (timer != null) {
            timer.close();
        }
    }
}
