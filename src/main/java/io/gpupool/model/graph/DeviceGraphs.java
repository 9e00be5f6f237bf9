package io.gpupool.model.graph;

import io.gpupool.backend.ComputeDevice;
import io.gpupool.backend.DeviceStream;
import io.gpupool.backend.GraphCapture;
import io.gpupool.kernels.TensorOps;
import io.gpupool.memory.DeviceAllocator;
import io.gpupool.model.HostTensor;
import io.gpupool.model.BatchableModel;
import io.gpupool.model.InferenceModel;
import io.gpupool.model.ShapePadding;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.lang.foreign.Arena;
import java.time.Duration;
import java.util.HashSet;
import java.util.List;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.Executor;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;

/**
 * CUDA graphs for one device: the graph cache, the capture thread and the two streams of its own
 * that capturing needs. The facade the wiring sees; the parts are package-private.
 *
 * <pre>
 *   serving streams 0..n-1   requests and batches: eager runs and graph replays (GraphedModel)
 *   graph stream             allocates and frees the graphs' pool blocks (the pool's stream for them; the
 *                            capture thread and evicting threads take turns under one lock, as the pool
 *                            lets one user at a time work on a stream's local cache)
 *   capture stream           warm-up runs and captures of forwards (GraphCapture's own; never allocates
 *                            from the pool, so the pool never holds, records or queries a fence of it:
 *                            its memory is always a block the graph stream allocated)
 *   capture thread           one per device; captures queue behind each other (at most QUEUE waiting,
 *                            more are dropped and retried by a later request of that shape)
 * </pre>
 * Capturing beside the serving streams rather than at an idle moment of one of them: a capture costs
 * about one eager forward of host time plus the instantiation, and on its own stream and thread it
 * takes no serving stream out of service; the capture mode is thread-local, so the serving threads'
 * calls cannot invalidate it.
 *
 * <p>Close after the models (which drop their graphs) and before the pool: waits for the capture
 * thread, frees every graph and block, destroys the streams.
 */
public final class DeviceGraphs implements GraphCacheControl, AutoCloseable {

    private static final Logger log = LoggerFactory.getLogger(DeviceGraphs.class);

    /** Captures that may wait for the capture thread. */
    static final int QUEUE = 16;

    private final ComputeDevice device;
    private final GraphCapture capture;
    private final DeviceStream graphStream;
    private final GraphCache cache;
    private final ShapeBuckets buckets;
    private final ForwardCapture forwardCapture;
    private final Executor executor;
    private final ExecutorService ownedExecutor;

    /**
     * Graphs for {@code device}, or empty where it has none (the host backend).
     *
     * @param firstOrdinal the first stream ordinal not used by the request and loading streams; this
     *                     and the next one are taken
     */
    public static Optional<DeviceGraphs> open(ComputeDevice device, DeviceAllocator pool, GraphLimits limits,
                                              ShapeBuckets buckets, int firstOrdinal) {
        Optional<GraphCapture> capture = device.openGraphCapture(firstOrdinal + 1);
        if (capture.isEmpty()) {
            return Optional.empty();
        }
        DeviceStream graphStream;
        try {
            graphStream = device.createStream(firstOrdinal);
        } catch (RuntimeException e) {
            capture.get().close();
            throw e;
        }
        ThreadPoolExecutor thread = new ThreadPoolExecutor(1, 1, 0, TimeUnit.SECONDS, new ArrayBlockingQueue<>(QUEUE),
                Thread.ofPlatform().name("gpupool-graphs-dev" + device.index()).daemon(true).factory());
        return Optional.of(new DeviceGraphs(device, capture.get(), graphStream, pool, limits, buckets, thread, thread));
    }

    /**
     * @param executor runs captures (tests pass a direct one)
     * @param owned    the executor to shut down on close, or null
     */
    DeviceGraphs(ComputeDevice device, GraphCapture capture, DeviceStream graphStream, DeviceAllocator pool,
                 GraphLimits limits, ShapeBuckets buckets, Executor executor, ExecutorService owned) {
        this.device = device;
        this.capture = capture;
        this.graphStream = graphStream;
        this.cache = new GraphCache(limits);
        this.buckets = buckets;
        this.forwardCapture = new ForwardCapture(capture, graphStream, pool, cache);
        this.executor = executor;
        this.ownedExecutor = owned;
    }

    /** {@code model} behind the graph cache when it can run padded; otherwise {@code model} itself. */
    public InferenceModel wrap(InferenceModel model) {
        Optional<ShapePadding> padding = model.padding();
        return padding.<InferenceModel>map(p -> model instanceof BatchableModel batchable
                ? new GraphedModel.Batchable(batchable, p, this) : new GraphedModel(model, p, this)).orElse(model);
    }

    @Override
    public GraphCacheMetrics metrics() {
        return cache;
    }

    @Override
    public GraphLimits limits() {
        return cache.limits();
    }

    @Override
    public void tune(GraphLimits limits) {
        cache.tune(limits);
    }

    GraphCache cache() {
        return cache;
    }

    ShapeBuckets buckets() {
        return buckets;
    }

    /**
     * Waits, at most {@code timeout}, until no capture is queued or running (tests and benchmarks: the
     * counters are final then). True when idle; always true with a caller-run executor.
     */
    boolean awaitIdle(Duration timeout) throws InterruptedException {
        if (!(ownedExecutor instanceof ThreadPoolExecutor thread)) {
            return true;
        }
        long deadline = System.nanoTime() + timeout.toNanos();
        while (thread.getCompletedTaskCount() != thread.getTaskCount()) {
            if (System.nanoTime() > deadline) {
                return false;
            }
            Thread.sleep(5);
        }
        return true;
    }

    /** Whether the capture stream is in capture mode now; false whenever no capture is in progress. */
    boolean capturing() {
        return capture.capturing();
    }

    /**
     * Queues the capture of {@code key}, whose claim the caller holds. The inputs are padded into
     * memory of the capture's own, since the request's memory ends with the request.
     */
    void scheduleCapture(InferenceModel model, GraphKey key, List<HostTensor> inputs, ShapePadding.Shape bucket,
                         ShapePadding padding, List<String> outputs, TensorOps ops) {
        Arena arena = Arena.ofShared();
        List<HostTensor> padded;
        try {
            padded = padding.pad(inputs, bucket, arena);
        } catch (RuntimeException | Error e) {
            arena.close();
            cache.captureFailed(key);
            throw e;
        }
        Set<String> wanted = new HashSet<>(outputs);
        scheduleCapture(model.name(), key, context -> model.infer(padded, wanted, context), ops, arena::close);
    }

    /**
     * Queues the capture of {@code forward} as the graph of {@code key}, whose claim the caller holds;
     * {@code release} frees what the forward reads, once, when the capture has ended or was not queued.
     */
    void scheduleCapture(String model, GraphKey key, PaddedForward<?> forward, TensorOps ops, Runnable release) {
        Runnable once = new Runnable() {
            private final java.util.concurrent.atomic.AtomicBoolean done = new java.util.concurrent.atomic.AtomicBoolean();

            @Override
            public void run() {
                if (done.compareAndSet(false, true)) {
                    release.run();
                }
            }
        };
        try {
            executor.execute(() -> {
                try {
                    device.bindToCurrentThread();
                    forwardCapture.capture(model, key, forward, ops);
                } finally {
                    once.run();
                }
            });
        } catch (RejectedExecutionException e) {
            once.run();
            cache.unclaim(key);
        } catch (RuntimeException | Error e) {
            once.run();
            cache.captureFailed(key);
            throw e;
        }
    }

    @Override
    public void close() {
        if (ownedExecutor != null) {
            ownedExecutor.shutdown();
            try {
                if (!ownedExecutor.awaitTermination(30, TimeUnit.SECONDS)) {
                    log.warn("Device {}: a graph capture did not finish within 30 s of shutdown", device.index());
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
        try {
            cache.evictAll();
        } finally {
            try {
                capture.close();
            } finally {
                graphStream.close();
            }
        }
    }
}
