package io.gpupool.actuate;

import java.util.Map;
import java.util.function.BooleanSupplier;
import java.util.function.Supplier;

import org.springframework.boot.health.contributor.Health;
import org.springframework.boot.health.contributor.HealthIndicator;

/**
 * Readiness of the models ({@code /actuator/health/models}, in the readiness group): UP once every
 * served model is loaded and its warm-up dry run has finished (the warm-up also sizes the pools),
 * OUT_OF_SERVICE before, so Kubernetes sends no traffic to a replica that would still allocate its
 * first pool chunks under load.
 */
public class ModelsHealthIndicator implements HealthIndicator {

    private final BooleanSupplier warmedUp;
    private final Supplier<Map<String, ?>> details;

    /**
     * @param warmedUp true once models are loaded and warmed
     * @param details  what to show (e.g. models served and models that failed to load)
     */
    public ModelsHealthIndicator(BooleanSupplier warmedUp, Supplier<Map<String, ?>> details) {
        this.warmedUp = warmedUp;
        this.details = details;
    }

    @Override
    public Health health() {
        Health.Builder builder = warmedUp.getAsBoolean() ? Health.up() : Health.outOfService();
        return builder.withDetails(details.get()).build();
    }
}
