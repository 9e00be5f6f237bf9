package io.gpupool.actuate;

import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.FunctionTimer;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Tags;
import io.micrometer.core.instrument.binder.BaseUnits;
import io.micrometer.core.instrument.binder.MeterBinder;

import java.util.Collection;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;
import java.util.function.Supplier;
import java.util.function.ToDoubleFunction;

/**
 * The figures of {@code GET /v2/models/stats} as meters, per model (tag {@code model}):
 * <ul>
 *   <li>{@code gpupool.model.inferences}, {@code gpupool.model.executions}: function counters;</li>
 *   <li>{@code gpupool.model.time}: a function timer per phase (tag {@code phase}: success, fail, queue,
 *       compute_input, compute_infer, compute_output), count and total time as the extension reports;</li>
 *   <li>{@code gpupool.model.memory} and {@code gpupool.model.memory.peak}: gauges in bytes, tag
 *       {@code kind} = {@code weights} or {@code requests} (the planned peak of the requests computing).</li>
 * </ul>
 * Each meter looks the model up by name when it is read, so a model that is unloaded reads 0 and one
 * that is loaded again continues under the same meters (counters start again from 0, which Prometheus
 * treats as a reset). Models loaded after start-up are added with {@link #register}.
 */
public class ModelStatisticsMeterBinder implements MeterBinder {

    private final Function<String, ModelFigures> lookup;
    private final Supplier<Collection<String>> initial;
    private volatile MeterRegistry registry;

    /**
     * @param lookup  the figures of the model with that name now, or null when it is not served
     * @param initial the names of the models served at start-up
     */
    public ModelStatisticsMeterBinder(Function<String, ModelFigures> lookup, Supplier<Collection<String>> initial) {
        this.lookup = lookup;
        this.initial = initial;
    }

    @Override
    public void bindTo(MeterRegistry registry) {
        this.registry = registry;
        for (String model : initial.get()) {
            register(model);
        }
    }

    /** Adds the meters of {@code model} (a no-op before binding or for a model already registered). */
    public void register(String model) {
        MeterRegistry target = registry;
        if (target == null) {
            return;
        }
        Tags tags = Tags.of("model", model);
        FunctionCounter.builder("gpupool.model.inferences", this, b -> read(model, ModelFigures::inferenceCount))
                .description("Rows inferred by successful requests (Triton's inference_count)")
                .tags(tags).register(target);
        FunctionCounter.builder("gpupool.model.executions", this, b -> read(model, ModelFigures::executionCount))
                .description("Forwards of the model (Triton's execution_count)")
                .tags(tags).register(target);
        for (ModelFigures.Phase phase : ModelFigures.Phase.values()) {
            FunctionTimer.builder("gpupool.model.time", this,
                            b -> (long) read(model, f -> f.count(phase)), b -> read(model, f -> f.nanos(phase)),
                            TimeUnit.NANOSECONDS)
                    .description("Requests or executions and their total time, per phase of Triton's inference_stats")
                    .tags(tags.and("phase", phase.tag())).register(target);
        }
        gauge(target, "gpupool.model.memory", "Device bytes the model holds now", tags.and("kind", "weights"),
                model, ModelFigures::weightBytes);
        gauge(target, "gpupool.model.memory", "Device bytes the model holds now", tags.and("kind", "requests"),
                model, ModelFigures::requestBytes);
        gauge(target, "gpupool.model.memory.peak", "Most device bytes the model held since it was loaded",
                tags.and("kind", "weights"), model, ModelFigures::weightPeakBytes);
        gauge(target, "gpupool.model.memory.peak", "Most device bytes the model held since it was loaded",
                tags.and("kind", "requests"), model, ModelFigures::requestPeakBytes);
    }

    private void gauge(MeterRegistry target, String name, String description, Tags tags, String model,
                       java.util.function.ToLongFunction<ModelFigures> value) {
        Gauge.builder(name, this, b -> read(model, value::applyAsLong)).description(description)
                .baseUnit(BaseUnits.BYTES).tags(tags).register(target);
    }

    private double read(String model, ToDoubleFunction<ModelFigures> value) {
        ModelFigures figures = lookup.apply(model);
        return figures == null ? 0 : value.applyAsDouble(figures);
    }
}
