package io.gpupool.actuate;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Supplier;

import io.gpupool.backend.ComputeDevice;
import org.springframework.boot.health.contributor.Health;
import org.springframework.boot.health.contributor.HealthIndicator;
import org.springframework.boot.health.contributor.Status;

/**
 * Health of the compute devices ({@code /actuator/health/device}): each device is asked for its free
 * memory, which on CUDA is a driver call into the device's context. A device that answers is UP (with
 * its name, total and free memory); one that throws (a lost GPU, a broken context) is DOWN with the
 * error. Part of the readiness group: a replica without a working device must not receive traffic.
 */
public class DeviceHealthIndicator implements HealthIndicator {

    private final Supplier<List<ComputeDevice>> devices;

    public DeviceHealthIndicator(Supplier<List<ComputeDevice>> devices) {
        this.devices = devices;
    }

    @Override
    public Health health() {
        List<ComputeDevice> all = devices.get();
        if (all.isEmpty()) {
            return Health.unknown().withDetail("reason", "no compute device is open").build();
        }
        Status status = Status.UP;
        Map<String, Object> details = new LinkedHashMap<>();
        for (ComputeDevice device : all) {
            Map<String, Object> d = new LinkedHashMap<>();
            try {
                d.put("name", device.name());
                d.put("totalBytes", device.totalMemory());
                d.put("freeBytes", device.freeMemory());
                d.put("status", Status.UP.getCode());
            }
            catch (RuntimeException | LinkageError ex) {
                d.put("status", Status.DOWN.getCode());
                d.put("error", ex.getClass().getSimpleName() + ": " + ex.getMessage());
                status = Status.DOWN;
            }
            details.put(Integer.toString(device.index()), d);
        }
        return Health.status(status).withDetails(details).build();
    }
}
