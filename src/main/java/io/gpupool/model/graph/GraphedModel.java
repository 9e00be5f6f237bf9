package io.gpupool.model.graph;

import io.gpupool.kernels.TensorOps;
import io.gpupool.model.BatchPadding;
import io.gpupool.model.BatchableModel;
import io.gpupool.model.BatchableModel.Member;
import io.gpupool.model.ModelSignature;
import io.gpupool.model.ExecutionContext;
import io.gpupool.model.ForwardingBatchableModel;
import io.gpupool.model.HostTensor;
import io.gpupool.model.InferenceModel;
import io.gpupool.model.PaddedBatchPadding;
import io.gpupool.model.PlannedMemory;
import io.gpupool.model.ShapePadding;
import io.gpupool.model.ShapePadding.Shape;
import io.gpupool.model.TensorSpec;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.lang.foreign.Arena;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Optional;
import java.util.Set;
import java.util.TreeSet;

/**
 * A model whose forward is replayed from a graph once its shape bucket has one: whatever device work
 * the wrapped model's forward enqueues is what gets captured, so the model itself knows nothing of
 * graphs.
 *
 * <pre>
 *   request (b, s) ── bucket (B, S) ── none (too large) ───────────────────────────► eager at (b, s)
 *                            │
 *                     cache.acquire(key) ── hit ─► pad to (B, S) ─► replay ─► trim to (b, s)
 *                            │ miss
 *                            ▼
 *                      eager at (b, s), right away: a request never waits for a capture
 *                            │ it succeeded and is the key's first miss
 *                            ▼
 *                      queue a capture of (B, S) on the device's capture thread (its own stream,
 *                      beside the serving streams)
 * </pre>
 * A replay runs the wrapped model's host code again (input checks and conversions, its walk over
 * the plan) with kernels that enqueue nothing ({@link HostOnlyOps}), allocations served at the
 * captured addresses ({@link GraphArena}) and a {@link ReplayStream} that uploads the inputs into the
 * graph's buffers, launches the graph once and downloads the outputs. So a bad input is refused with
 * the same message as on an eager run, and the device sees: uploads, one graph launch, downloads. A
 * replay that does not match its capture, or fails otherwise, falls back to eager, drops the graph
 * and counts a failure. A model that also batches replays its batches the same way ({@link Batchable}): a packed
 * batch bucketed by its total tokens, a padded-layout batch as the request of its shape.
 */
class GraphedModel implements InferenceModel, PlannedMemory {

    private static final Logger log = LoggerFactory.getLogger(GraphedModel.class);

    final InferenceModel delegate;
    private final ShapePadding padding;
    final DeviceGraphs graphs;
    /** The host-only view of the last kernels seen (one device: the same kernels on every stream). */
    private volatile OpsView opsView;

    private record OpsView(TensorOps real, TensorOps hostOnly) {
    }

    GraphedModel(InferenceModel delegate, ShapePadding padding, DeviceGraphs graphs) {
        this.delegate = delegate;
        this.padding = padding;
        this.graphs = graphs;
    }

    /** The model this one replays. */
    InferenceModel delegate() {
        return delegate;
    }

    @Override
    public List<HostTensor> infer(List<HostTensor> inputs, Set<String> requestedOutputs, ExecutionContext context) {
        GraphCache cache = graphs.cache();
        Shape shape = cache.enabled() ? padding.shapeOf(inputs) : null;
        Shape bucket = shape == null ? null : bucketOf(shape);
        if (bucket == null) {
            return delegate.infer(inputs, requestedOutputs, context);
        }
        List<String> outputs = outputsKey(requestedOutputs == null ? Set.of() : requestedOutputs);
        GraphKey key;
        try (Arena arena = Arena.ofConfined()) {
            List<HostTensor> padded = padding.pad(inputs, bucket, arena);
            key = GraphKey.request(this, context.ops(), bucket.batch(), bucket.sequence(), names(padded), outputs);
            List<HostTensor> replayed = replayIfCached(key, c -> delegate.infer(padded, requestedOutputs, c), context);
            if (replayed != null) {
                return padding.trim(replayed, shape);
            }
        }
        List<HostTensor> result = delegate.infer(inputs, requestedOutputs, context);
        // Only inputs the model accepted are worth a capture: a rejected request (a token outside the
        // vocabulary) would make the capture fail and mark its shape as not capturable.
        if (cache.claimCapture(key)) {
            graphs.scheduleCapture(delegate, key, inputs, bucket, padding, outputs, context.ops());
        }
        return result;
    }

    /**
     * The outputs a forward computes as its key names them: sorted, and empty where they are all of the model's (as a
     * request that selects none asks), so that one computation has one key whichever way it was asked for.
     */
    List<String> outputsKey(Collection<String> names) {
        TreeSet<String> sorted = new TreeSet<>(names);
        List<TensorSpec> all = outputs();
        if (sorted.size() == all.size() && all.stream().allMatch(spec -> sorted.contains(spec.name()))) {
            return List.of();
        }
        return List.copyOf(sorted);
    }

    private Shape bucketOf(Shape shape) {
        return bucketOf(shape, delegate.maxBatchSize());
    }

    /** {@code shape} rounded up on the request buckets, its batch at most {@code maxBatch}; null where none fits. */
    Shape bucketOf(Shape shape, int maxBatch) {
        ShapeBuckets buckets = graphs.buckets();
        int batch = buckets.batchBucket(shape.batch(), maxBatch);
        if (batch == 0) {
            return null;
        }
        if (shape.sequence() == 0) {
            return new Shape(batch, 0);
        }
        int sequence = buckets.sequenceBucket(shape.sequence(), delegate.maxSequenceLength());
        return sequence == 0 ? null : new Shape(batch, sequence);
    }

    /**
     * The outputs of {@code forward} replayed from the cached graph of {@code key}; null when there is none idle
     * (a miss) or its replay failed, and then the caller runs eagerly. A failed replay drops the graph.
     *
     * @throws IllegalArgumentException the request's own fault (a bad input), refused as on an eager run
     */
    <T> T replayIfCached(GraphKey key, PaddedForward<T> forward, ExecutionContext context) {
        GraphCache cache = graphs.cache();
        CapturedForward entry = cache.acquire(key);
        if (entry == null) {
            return null;
        }
        boolean mismatch = false;
        try {
            return replay(entry, forward, context);
        } catch (IllegalArgumentException e) {
            throw e;
        } catch (RuntimeException e) {
            // The graph does not fit the forward (GraphMismatchException) or its replay failed:
            // drop it and answer eagerly, which either works or fails with its own error.
            mismatch = true;
            cache.invalidate(entry);
            log.warn("The graph of model '{}' at {} failed its replay, running eagerly: {}", name(), key,
                    e.toString());
            return null;
        } finally {
            if (!mismatch) {
                cache.release(entry);
            }
        }
    }

    private <T> T replay(CapturedForward entry, PaddedForward<T> forward, ExecutionContext context) {
        GraphArena arena = entry.arena();
        arena.rewind();
        ReplayStream stream = new ReplayStream(context.stream(), entry);
        T outputs = forward.run(new ExecutionContext(stream, arena, hostOnly(context.ops())));
        arena.checkComplete();
        if (!stream.launched()) {
            throw new GraphMismatchException("the forward finished without launching its graph");
        }
        return outputs;
    }

    private TensorOps hostOnly(TensorOps real) {
        OpsView view = opsView;
        if (view == null || view.real() != real) {
            view = new OpsView(real, HostOnlyOps.over(real));
            opsView = view;
        }
        return view.hostOnly();
    }

    private static List<String> names(List<HostTensor> tensors) {
        List<String> names = new ArrayList<>(tensors.size());
        for (HostTensor tensor : tensors) {
            names.add(tensor.name());
        }
        return List.copyOf(new TreeSet<>(names));
    }

    @Override
    public ModelSignature signature() {
        return delegate.signature();
    }

    /** The wrapped model's plan (0 when it has none), so pool sizing sees through the wrapper. */
    @Override
    public long peakActivationBytes(int batch, int seq) {
        return delegate instanceof PlannedMemory planned ? planned.peakActivationBytes(batch, seq) : 0;
    }

    @Override
    public long peakActivationBytes(int batch, int seq, java.util.function.LongUnaryOperator blockBytes) {
        return delegate instanceof PlannedMemory planned ? planned.peakActivationBytes(batch, seq, blockBytes) : 0;
    }

    @Override
    public long largestActivationBytes(int batch, int seq) {
        return delegate instanceof PlannedMemory planned ? planned.largestActivationBytes(batch, seq) : 0;
    }

    @Override
    public Optional<ShapePadding> padding() {
        return Optional.of(padding);
    }

    /** Frees this model's graphs (their pool blocks go back), then the model. */
    @Override
    public void close() {
        try {
            graphs.cache().evictModel(this);
        } finally {
            delegate.close();
        }
    }

    @Override
    public String toString() {
        return "graphed " + delegate;
    }

    /**
     * The graphed form of a model that also batches: a batch replays the graph of its bucket, as a request does, in
     * either layout (the model offers one padding or the other, or none).
     * <pre>
     *   batch ── graphs off, or the model has no batch padding ─────────────────────────────────────────► eager
     *     │ packed: N sequences, T tokens               │ padded layout: [R rows, longest S*]
     *     ▼                                             ▼
     *   packedBucket (N', T'), a key of its own      request buckets (R', S'), R'·S' within the model's cells:
     *     │ none: too many tokens ─► eager              │ the key of a request R' x S' (shared with requests)
     *     │                                             │ none: too large, or a sequence fully masked ─► eager
     *     ▼                                             ▼
     *   cache.acquire(key) ── hit ─► the padded forward at the bucket, replayed ─► each member's outputs
     *     │ miss
     *     ▼
     *   eager batch right away; a first miss that succeeded queues a capture of the padded forward at the bucket
     * </pre>
     * <ol>
     *   <li>packed: the batch's shape is its total tokens and sequences ({@link BatchPadding.Shape}), rounded up by
     *       {@link ShapeBuckets#packedBucket}; the model runs it padded to the bucket
     *       ({@link BatchPadding#inferPadded}). A packed forward is a layout of its own, so its key never matches a
     *       request's.</li>
     *   <li>padded layout: the batch's forward [R, S*] is a request's of batch R and sequence S*, so it takes the
     *       request buckets (each number rounded up as a request's) and the request's key: the model runs it padded
     *       to the bucket as a request is padded ({@link PaddedBatchPadding#inferPadded}), with the same inputs present
     *       (the mask always), the same outputs computed ({@link #outputsKey}) and the same uploads and downloads, so
     *       a batch replays a request's graph and a request a batch's. Only the bound on the rows differs: a batch's
     *       cells (R'·S') at most the largest request's ({@link PaddedBatchPadding#fits}), where a request's batch is
     *       at most the model's largest; a request never reaches a key above that.</li>
     * </ol>
     * Either way the padded forward gives every member what the eager batch gives it, so one graph serves every
     * batch of the bucket. The capture keeps the members (their converted inputs live on the heap) until it has run;
     * the cache's bounds, metrics, failure handling and memory rules are the requests' ({@link GraphCache},
     * {@link ForwardCapture}).
     */
    static final class Batchable extends GraphedModel implements ForwardingBatchableModel {

        private final BatchableModel batchable;
        /** Null where the model's batches are not packed at a bucket. */
        private final BatchPadding batchPadding;
        /** Null where the model's batches are not padded to a request bucket. */
        private final PaddedBatchPadding paddedBatchPadding;

        Batchable(BatchableModel delegate, ShapePadding padding, DeviceGraphs graphs) {
            super(delegate, padding, graphs);
            this.batchable = delegate;
            this.batchPadding = delegate.batchPadding().orElse(null);
            this.paddedBatchPadding = delegate.paddedBatchPadding().orElse(null);
        }

        @Override
        public BatchableModel batchable() {
            return batchable;
        }

        @Override
        public List<List<HostTensor>> inferBatch(List<? extends Member> members, ExecutionContext context) {
            if (graphs.cache().enabled()) {
                List<? extends Member> batch = List.copyOf(members);
                if (batchPadding != null) {
                    BatchPadding.Shape bucket = graphs.buckets().packedBucket(BatchPadding.Shape.of(batch));
                    if (bucket != null) {
                        GraphKey key = GraphKey.packed(this, context.ops(), bucket.sequences(), bucket.tokens(),
                                batchPadding.inputs(batch), batchPadding.outputs(batch));
                        return replayOrRun(key, c -> batchPadding.inferPadded(batch, bucket, c), batch, context);
                    }
                } else if (paddedBatchPadding != null) {
                    Shape bucket = paddedBucket(batch);
                    if (bucket != null) {
                        GraphKey key = GraphKey.request(this, context.ops(), bucket.batch(), bucket.sequence(),
                                paddedBatchPadding.inputs(batch), outputsKey(paddedBatchPadding.outputs(batch)));
                        return replayOrRun(key, c -> paddedBatchPadding.inferPadded(batch, bucket, c), batch,
                                context);
                    }
                }
            }
            return batchable.inferBatch(members, context);
        }

        /** The request bucket of a padded-layout batch; null where it has none (then it runs eagerly). */
        private Shape paddedBucket(List<? extends Member> batch) {
            Shape shape = paddedBatchPadding.shapeOf(batch);
            // the rows are bounded by the model's cells (fits), not by its largest request's batch
            Shape bucket = shape == null ? null : bucketOf(shape, Integer.MAX_VALUE);
            return bucket != null && paddedBatchPadding.fits(bucket) ? bucket : null;
        }

        /** Replays {@code padded} from the graph of {@code key}; on a miss the eager batch, and maybe a capture. */
        private List<List<HostTensor>> replayOrRun(GraphKey key, PaddedForward<List<List<HostTensor>>> padded,
                                                   List<? extends Member> batch, ExecutionContext context) {
            List<List<HostTensor>> replayed = replayIfCached(key, padded, context);
            if (replayed != null) {
                return replayed;
            }
            List<List<HostTensor>> result = batchable.inferBatch(batch, context);
            // As for a request: only a batch the model ran is worth a capture.
            if (graphs.cache().claimCapture(key)) {
                graphs.scheduleCapture(name(), key, padded, context.ops(), () -> { });
            }
            return result;
        }
    }
}
