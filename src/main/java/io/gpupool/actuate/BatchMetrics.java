package io.gpupool.actuate;

import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.DistributionSummary;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Timer;

import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentMap;
import java.util.concurrent.TimeUnit;

/**
 * Meters of model executions, batched or not (tag {@code model}):
 * <ul>
 *   <li>{@code gpupool.batch.executions}, {@code gpupool.batch.inferences} (counters): forwards that ran to their
 *       end, and batch rows they served (a forward cut short by out-of-memory and run again alone counts once); their ratio is the mean batch size in rows (Triton's execution_count / inference_count);</li>
 *   <li>{@code gpupool.batch.size} (requests) and {@code gpupool.batch.tokens} (tokens): distribution summaries per
 *       execution, with percentile histograms; a request run alone is an execution of size 1;</li>
 *   <li>{@code gpupool.batch.queue.delay} (timer, percentile histogram): time a request waited in its model's
 *       batch queue until its batch started;</li>
 *   <li>{@code gpupool.batch.bypassed} (counter): requests that filled a batch alone and ran at once, outside the
 *       queue; counted with their execution (of size 1), so one the device queue refused with 503 is not, and never
 *       in the queue delay.</li>
 * </ul>
 * Pass as {@code model} only names of served models: every distinct name creates meters.
 */
public class BatchMetrics {

    private final MeterRegistry registry;
    private final ConcurrentMap<String, ModelMeters> models = new ConcurrentHashMap<>();

    public BatchMetrics(MeterRegistry registry) {
        this.registry = registry;
    }

    /** One forward of {@code model} for {@code requests} requests, {@code rows} batch rows, {@code tokens} tokens. */
    public void executed(String model, int requests, int rows, int tokens) {
        ModelMeters m = model(model);
        m.executions.increment();
        m.inferences.increment(rows);
        m.size.record(requests);
        m.tokens.record(tokens);
    }

    /** A request of {@code model} waited {@code nanos} for its batch. */
    public void queueDelay(String model, long nanos) {
        model(model).queueDelay.record(nanos, TimeUnit.NANOSECONDS);
    }

    /** A request of {@code model} ran at once, outside its batch queue. */
    public void bypassed(String model) {
        model(model).bypassed.increment();
    }

    private ModelMeters model(String model) {
        return models.computeIfAbsent(model, m -> new ModelMeters(registry, m));
    }

    private static final class ModelMeters {
        final Counter executions;
        final Counter inferences;
        final DistributionSummary size;
        final DistributionSummary tokens;
        final Timer queueDelay;
        final Counter bypassed;

        ModelMeters(MeterRegistry registry, String model) {
            executions = Counter.builder("gpupool.batch.executions")
                    .description("Model forwards run, batched or not (Triton's execution_count)")
                    .tags("model", model).register(registry);
            inferences = Counter.builder("gpupool.batch.inferences")
                    .description("Batch rows served by those forwards (Triton's inference_count)")
                    .tags("model", model).register(registry);
            size = DistributionSummary.builder("gpupool.batch.size")
                    .description("Requests per model forward (1 when a request runs alone)").baseUnit("requests")
                    .tags("model", model).publishPercentileHistogram().register(registry);
            tokens = DistributionSummary.builder("gpupool.batch.tokens")
                    .description("Tokens per model forward (batch rows for models without a sequence axis)")
                    .baseUnit("tokens").tags("model", model).publishPercentileHistogram().register(registry);
            queueDelay = Timer.builder("gpupool.batch.queue.delay")
                    .description("Time a request waited in its model's batch queue until its batch started")
                    .tags("model", model).publishPercentileHistogram().register(registry);
            bypassed = Counter.builder("gpupool.batch.bypassed")
                    .description("Requests that filled a batch alone and ran at once, outside the batch queue")
                    .baseUnit("requests").tags("model", model).register(registry);
        }
    }
}
