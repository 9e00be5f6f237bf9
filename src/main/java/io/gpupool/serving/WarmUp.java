package io.gpupool.serving;

import io.gpupool.model.DataType;
import io.gpupool.model.HostTensor;
import io.gpupool.model.InferenceModel;
import io.gpupool.model.TensorSpec;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * The start-up sizing and dry run.
 *
 * <ol>
 *   <li>Per device: the largest single allocation any of its models makes at its largest accepted
 *       size (maximum batch, maximum sequence length), as the models' liveness plans report it (a
 *       tensor, or with {@code gpupool.serving.request-arena} a forward's whole arena); the
 *       device's pool reserves 1.5 × that up front (less makes the first requests grow the pool,
 *       more reserves memory no request uses).</li>
 *   <li>Every model runs once per device at that size, through the same stream lease a request takes. That
 *       grows the pool to its working size before the first request, and proves the model runs. A
 *       model whose dry run fails is marked unavailable (and reported by the repository index)
 *       instead of failing later under load.</li>
 *   <li>Where shapes to warm are given (the CUDA kernels measure each GEMM shape on its first run,
 *       {@code gpupool.kernels.gemm-tuning}), every model also runs once at each of them, clipped to its own
 *       limits: the shapes requests will run are measured before the first request, not on it.</li>
 *   <li>The server reports ready only after this finished.</li>
 * </ol>
 *
 * <p>Inputs are zeros, except integer inputs whose name contains "mask", which are ones (a fully
 * masked sequence is not a realistic peak).
 */
public final class WarmUp {

    private static final Logger log = LoggerFactory.getLogger(WarmUp.class);

    /** How the warm-up learns tensor sizes and grows a device's pool; the configuration supplies it. */
    public interface PoolSizing {

        /** No sizing: the pools grow on demand during the dry runs. */
        PoolSizing NONE = new PoolSizing() {
            @Override
            public long largestTensorBytes(InferenceModel model, int batch, int sequence) {
                return 0;
            }

            @Override
            public long reserve(DeviceRuntime device, long bytes) {
                return 0;
            }
        };

        /** Bytes of the largest single tensor {@code model} allocates for one request of this size (0 if unknown). */
        long largestTensorBytes(InferenceModel model, int batch, int sequence);

        /** Makes {@code device}'s pool hold at least {@code bytes}; returns the bytes newly reserved. */
        long reserve(DeviceRuntime device, long bytes);
    }

    /** A batch × sequence a dry run also runs at (step 3 of the class comment). */
    public record Shape(int batch, int sequence) {
        public Shape {
            if (batch < 1 || sequence < 1) {
                throw new IllegalArgumentException("a warm-up shape needs batch and sequence >= 1, got " + batch + "x"
                        + sequence);
            }
        }
    }

    /** The initial pool size as a multiple of the largest tensor (see the class comment). */
    static final double INITIAL_SIZE_FACTOR = 1.5;

    private final ModelRegistry registry;
    private final List<DeviceRuntime> devices;
    private final Map<Integer, DeviceWorker> workers;
    private final int serverMaxBatch;
    private final int serverMaxSequence;
    private final PoolSizing sizing;
    private final List<Shape> alsoAt;

    public WarmUp(ModelRegistry registry, List<DeviceRuntime> devices, int serverMaxBatch, int serverMaxSequence) {
        this(registry, devices, serverMaxBatch, serverMaxSequence, PoolSizing.NONE);
    }

    public WarmUp(ModelRegistry registry, List<DeviceRuntime> devices, int serverMaxBatch, int serverMaxSequence,
                  PoolSizing sizing) {
        this(registry, devices, serverMaxBatch, serverMaxSequence, sizing, List.of());
    }

    /** As above; each dry run also runs at every shape of {@code alsoAt} (step 3 of the class comment). */
    public WarmUp(ModelRegistry registry, List<DeviceRuntime> devices, int serverMaxBatch, int serverMaxSequence,
                  PoolSizing sizing, List<Shape> alsoAt) {
        this.alsoAt = List.copyOf(alsoAt);
        this.registry = registry;
        this.devices = List.copyOf(devices);
        this.sizing = sizing;
        Map<Integer, DeviceWorker> byIndex = new java.util.HashMap<>();
        devices.forEach(device -> byIndex.put(device.index(), device.worker()));
        this.workers = byIndex;
        this.serverMaxBatch = serverMaxBatch;
        this.serverMaxSequence = serverMaxSequence;
    }

    /** Runs every dry run (blocking the calling thread, which must not be an event-loop thread). */
    public void run() {
        for (DeviceRuntime device : devices) {
            long largest = 0;
            for (ServedModel model : registry.models()) {
                InferenceModel replica = model.replicas().get(device.index());
                if (replica != null) {
                    largest = Math.max(largest, sizing.largestTensorBytes(replica, maxBatch(model), maxSequence(model)));
                }
            }
            if (largest > 0) {
                long target = (long) Math.ceil(INITIAL_SIZE_FACTOR * largest);
                try {
                    long reserved = sizing.reserve(device, target);
                    log.info("Device {}: largest tensor at maximum size is {} bytes; pool reserved {} more bytes "
                            + "towards 1.5 × that ({} bytes)", device.index(), largest, reserved, target);
                } catch (RuntimeException e) {
                    log.warn("Device {}: could not reserve {} bytes up front ({}); the pool grows on demand",
                            device.index(), target, e.getMessage());
                }
            }
        }
        for (ServedModel model : registry.models()) {
            try {
                dryRun(model);
                model.markReady();
            } catch (RuntimeException e) {
                log.error("Warm-up of model '{}' failed; it will not be served", model.name(), e);
                model.markFailed("warm-up failed: " + e.getMessage());
            }
        }
        registry.markWarmedUp();
    }

    /**
     * Runs {@code model} once on each of its devices at its largest size (blocking); a model loaded
     * at run time takes this before it serves. Throws what the model threw.
     */
    public void dryRun(ServedModel model) {
        for (Map.Entry<Integer, InferenceModel> replica : model.replicas().entrySet()) {
            long started = System.nanoTime();
            DeviceWorker worker = workers.get(replica.getKey());
            List<Shape> shapes = shapes(model);
            worker.submit(context -> {
                for (Shape shape : shapes) {
                    try (Arena arena = Arena.ofConfined()) {
                        replica.getValue().infer(inputs(model, shape, arena), Set.of(), context);
                    }
                }
                return Boolean.TRUE;
            }).block();
            log.info("Warm-up of model '{}' on device {} at batch {} × sequence {}{} took {} ms", model.name(),
                    replica.getKey(), maxBatch(model), maxSequence(model),
                    shapes.size() > 1 ? " and " + (shapes.size() - 1) + " smaller shapes" : "",
                    (System.nanoTime() - started) / 1_000_000);
        }
    }

    /** Marks every model ready without a dry run ({@code gpupool.serving.warm-up=false}). */
    public void skip() {
        registry.models().forEach(ServedModel::markReady);
        registry.markWarmedUp();
    }

    /** The batch the dry run uses: the largest the decoder admits (at least 1). */
    int maxBatch(ServedModel model) {
        return Math.max(1, model.batchLimit(serverMaxBatch));
    }

    /** The sequence length the dry run uses: the longest the decoder admits, 1 without a sequence axis. */
    int maxSequence(ServedModel model) {
        return Math.max(1, model.sequenceLimit(serverMaxSequence));
    }

    /** The largest size first, then each of {@link #alsoAt} clipped to the model's limits, each once. */
    List<Shape> shapes(ServedModel model) {
        java.util.LinkedHashSet<Shape> shapes = new java.util.LinkedHashSet<>();
        shapes.add(new Shape(maxBatch(model), maxSequence(model)));
        for (Shape shape : alsoAt) {
            shapes.add(new Shape(Math.min(shape.batch(), maxBatch(model)),
                    Math.min(shape.sequence(), maxSequence(model))));
        }
        return List.copyOf(shapes);
    }

    private List<HostTensor> inputs(ServedModel model, Shape size, Arena arena) {
        List<HostTensor> inputs = new ArrayList<>();
        for (TensorSpec spec : model.inputs()) {
            if (!spec.dataType().isFixedSize()) {
                continue;   // an optional BYTES input (text): the numeric inputs it stands for run at full size
            }
            long[] shape = spec.shape();
            for (int i = 0; i < shape.length; i++) {
                if (shape[i] == -1) {
                    shape[i] = i == 0 ? size.batch() : i == 1 ? size.sequence() : 1;
                }
            }
            DataType type = spec.dataType();
            long count = HostTensor.elementCount(shape);
            MemorySegment data = arena.allocate(Math.max(1, count * type.byteSize()), 64)
                    .asSlice(0, count * type.byteSize());
            boolean ones = spec.name().toLowerCase(java.util.Locale.ROOT).contains("mask");
            if (ones && type == DataType.INT32) {
                for (long i = 0; i < count; i++) {
                    data.setAtIndex(ValueLayout.JAVA_INT_UNALIGNED, i, 1);
                }
            } else if (ones && type == DataType.INT64) {
                for (long i = 0; i < count; i++) {
                    data.setAtIndex(ValueLayout.JAVA_LONG_UNALIGNED, i, 1L);
                }
            }
            inputs.add(new HostTensor(spec.name(), type, shape, data));
        }
        return inputs;
    }
}
