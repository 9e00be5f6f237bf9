package io.gpupool.actuate;

import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

import io.gpupool.memory.metric.PoolMetrics;
import org.springframework.boot.health.contributor.Health;
import org.springframework.boot.health.contributor.HealthIndicator;
import org.springframework.boot.health.contributor.Status;

/**
 * Health of every device's pool ({@code /actuator/health/pool}).
 *
 * <p>DOWN while allocations are failing: when a pool's failure counter (allocations that failed even
 * after the staged out-of-memory recovery) rose since the previous check. UP otherwise, with the
 * numbers an operator looks at first (reserved against the cap, fragmentation, failures). The pool is
 * kept out of the liveness and readiness groups on purpose: a restart would not give the device more
 * memory, and a replica that sheds load for one probe period after each failure would flap.
 */
public class PoolHealthIndicator implements HealthIndicator {

    private final ManagedPools pools;
    /** Failure count per device at the previous check. */
    private final Map<String, Long> lastFailures = new ConcurrentHashMap<>();

    public PoolHealthIndicator(ManagedPools pools) {
        this.pools = pools;
    }

    @Override
    public Health health() {
        Status status = Status.UP;
        Map<String, Object> devices = new LinkedHashMap<>();
        for (ManagedPool pool : pools.all()) {
            PoolMetrics m = pool.metrics();
            long failures = m.counters().failures();
            Long before = lastFailures.put(pool.device(), failures);
            boolean failing = before != null && failures > before;
            long cap = pool.capBytes();
            Map<String, Object> details = new LinkedHashMap<>();
            details.put("status", failing ? Status.DOWN.getCode() : Status.UP.getCode());
            details.put("reservedBytes", m.reservedBytes());
            details.put("allocatedBytes", m.allocatedBytes());
            details.put("capBytes", cap);
            details.put("reservedOfCap", cap == 0 ? 0.0 : (double) m.reservedBytes() / cap);
            details.put("fragmentation", m.fragmentation());
            details.put("failures", failures);
            if (failing) {
                details.put("reason", (failures - before) + " allocation(s) failed after recovery since the last check");
                status = Status.DOWN;
            }
            devices.put(pool.device(), details);
        }
        if (devices.isEmpty()) {
            return Health.unknown().withDetail("reason", "no device pool is open").build();
        }
        return Health.status(status).withDetails(devices).build();
    }
}
