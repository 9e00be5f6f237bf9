package io.gpupool.actuate;

import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Tags;
import io.micrometer.core.instrument.Timer;

/**
 * What the serving layer reports about inference requests, and the autoscaling signal.
 *
 * <p>One {@link Request} per inference request, driven through its life:
 * <pre>
 *   Request r = metrics.enqueued(model, device);  // queue depth +1
 *   r.started();                                   // queue depth -1, in flight +1, queue wait recorded
 *   r.finished(InferenceOutcome.SUCCESS);          // in flight -1, compute time and outcome recorded
 * </pre>
 * A request rejected or cancelled while queued calls {@code finished} without {@code started}; it
 * then counts only its outcome (and leaves the queue). {@code finished} is idempotent, so a
 * cancellation racing a completion is counted once.
 *
 * <p>Meters: {@code gpupool.inference.requests} (counter; tags model, outcome),
 * {@code gpupool.inference.queue.wait} and {@code gpupool.inference.compute} (timers with a percentile
 * histogram; tag model), {@code gpupool.inference.in.flight} and {@code gpupool.inference.queue.depth}
 * (gauges; tag device). Queue depth per device is the signal for a horizontal autoscaler.
 *
 * <p>Pass as {@code model} only names of models the repository serves (use {@link #UNKNOWN_MODEL}
 * for a request naming no known model): every distinct name creates meters.
 */
public class InferenceMetrics {

    /** The model tag for requests that name no served model (keeps the tag's values bounded). */
    public static final String UNKNOWN_MODEL = "_unknown";

    private final MeterRegistry registry;
    private final ConcurrentMap<String, DeviceGauges> devices = new ConcurrentHashMap<>();
    private final ConcurrentMap<String, ModelMeters> models = new ConcurrentHashMap<>();

    public InferenceMetrics(MeterRegistry registry) {
        this.registry = registry;
    }

    /** A request for {@code model} entered the queue of {@code device} (e.g. {@code cuda:0}). */
    public Request enqueued(String model, String device) {
        DeviceGauges gauges = device(device);
        gauges.queued.incrementAndGet();
        return new Request(model(model), gauges, System.nanoTime());
    }

    /** Registers the gauges of a device before its first request, so dashboards show 0 rather than nothing. */
    public void registerDevice(String device) {
        device(device);
    }

    /** Requests waiting in {@code device}'s queue now. */
    public int queueDepth(String device) {
        DeviceGauges g = devices.get(device);
        return g == null ? 0 : g.queued.get();
    }

    /** Requests computing on {@code device} now. */
    public int inFlight(String device) {
        DeviceGauges g = devices.get(device);
        return g == null ? 0 : g.inFlight.get();
    }

    private DeviceGauges device(String device) {
        return devices.computeIfAbsent(device, d -> new DeviceGauges(registry, d));
    }

    private ModelMeters model(String model) {
        return models.computeIfAbsent(model, m -> new ModelMeters(registry, m));
    }

    /** One request's progress; not thread-safe except that {@link #finished} may race itself safely. */
    public static final class Request {
        private static final int QUEUED = 0;
        private static final int RUNNING = 1;
        private static final int DONE = 2;

        private final ModelMeters model;
        private final DeviceGauges device;
        private final AtomicInteger state = new AtomicInteger(QUEUED);
        private final AtomicLong mark;

        Request(ModelMeters model, DeviceGauges device, long enqueuedAt) {
            this.model = model;
            this.device = device;
            this.mark = new AtomicLong(enqueuedAt);
        }

        /** The request left the queue and holds a stream: its compute begins. */
        public void started() {
            if (state.compareAndSet(QUEUED, RUNNING)) {
                long now = System.nanoTime();
                model.queueWait.record(now - mark.getAndSet(now), TimeUnit.NANOSECONDS);
                device.queued.decrementAndGet();
                device.inFlight.incrementAndGet();
            }
        }

        /** The request ended (answered, rejected, timed out or cancelled). Later calls are ignored. */
        public void finished(InferenceOutcome outcome) {
            int previous = state.getAndSet(DONE);
            if (previous == DONE) {
                return;
            }
            if (previous == RUNNING) {
                model.compute.record(System.nanoTime() - mark.get(), TimeUnit.NANOSECONDS);
                device.inFlight.decrementAndGet();
            }
            else {
                device.queued.decrementAndGet();
            }
            model.outcome(outcome).increment();
        }
    }

    private static final class DeviceGauges {
        final AtomicInteger queued = new AtomicInteger();
        final AtomicInteger inFlight = new AtomicInteger();

        DeviceGauges(MeterRegistry registry, String device) {
            Gauge.builder("gpupool.inference.queue.depth", queued, AtomicInteger::get)
                    .description("Requests waiting for a stream on the device (autoscaling signal)")
                    .tags("device", device).register(registry);
            Gauge.builder("gpupool.inference.in.flight", inFlight, AtomicInteger::get)
                    .description("Requests computing on the device").tags("device", device)
                    .register(registry);
        }
    }

    private static final class ModelMeters {
        final Timer queueWait;
        final Timer compute;
        final Counter[] outcomes = new Counter[InferenceOutcome.values().length];

        ModelMeters(MeterRegistry registry, String model) {
            queueWait = Timer.builder("gpupool.inference.queue.wait")
                    .description("Time from arrival in the device queue to holding a stream").tags("model", model)
                    .publishPercentileHistogram().register(registry);
            compute = Timer.builder("gpupool.inference.compute")
                    .description("Time from holding a stream to the answer").tags("model", model)
                    .publishPercentileHistogram().register(registry);
            for (InferenceOutcome outcome : InferenceOutcome.values()) {
                outcomes[outcome.ordinal()] = Counter.builder("gpupool.inference.requests")
                        .description("Inference requests by model and outcome")
                        .tags(Tags.of("model", model, "outcome", outcome.tag())).register(registry);
            }
        }

        Counter outcome(InferenceOutcome outcome) {
            return outcomes[outcome.ordinal()];
        }
    }
}
