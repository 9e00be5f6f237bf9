package io.gpupool.serving;

import io.gpupool.model.InferenceModel;
import io.gpupool.model.TensorSpec;

import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * One model as the server offers it: its metadata (taken from the first replica) and one loaded
 * replica per device index. Ready once its warm-up dry run has passed on every device.
 */
public final class ServedModel {

    private final String name;
    private final String version;
    private final String platform;
    private final List<TensorSpec> inputs;
    private final List<TensorSpec> outputs;
    private final int maxBatchSize;
    private final int maxSequenceLength;
    private final Map<String, List<String>> classLabels;
    private final Map<Integer, InferenceModel> replicas;
    private final ModelStatistics statistics = new ModelStatistics();
    /** Requests computing on a replica now; see {@link #enter()}. */
    private final AtomicInteger running = new AtomicInteger();
    private volatile boolean unloading;
    private volatile boolean ready;
    private volatile String failureReason;

    /**
     * @param replicas device index to the model loaded on that device; at least one, all with the
     *                 same name, version and signature
     */
    public ServedModel(Map<Integer, InferenceModel> replicas) {
        if (replicas.isEmpty()) {
            throw new IllegalArgumentException("a served model needs at least one replica");
        }
        this.replicas = Map.copyOf(replicas);
        InferenceModel first = new TreeMap<>(replicas).firstEntry().getValue();
        this.name = first.name();
        this.version = first.version();
        this.platform = first.platform();
        this.inputs = List.copyOf(first.inputs());
        this.outputs = List.copyOf(first.outputs());
        this.maxBatchSize = first.maxBatchSize();
        this.maxSequenceLength = first.maxSequenceLength();
        this.classLabels = first.signature().classLabels();
        for (InferenceModel replica : replicas.values()) {
            if (!replica.name().equals(name) || !replica.version().equals(version)
                    || !replica.inputs().equals(inputs) || !replica.outputs().equals(outputs)) {
                throw new IllegalArgumentException("replicas of model '" + name + "' differ in name, version or signature");
            }
        }
        statistics.weightsLoaded(replicas.values().stream().mapToLong(InferenceModel::weightBytes).sum());
    }

    public String name() {
        return name;
    }

    public String version() {
        return version;
    }

    public String platform() {
        return platform;
    }

    public List<TensorSpec> inputs() {
        return inputs;
    }

    /** The names of the classes {@code output}'s last dimension indexes, or an empty list (see {@link Classification}). */
    public List<String> classLabels(String output) {
        return classLabels.getOrDefault(output, List.of());
    }

    public List<TensorSpec> outputs() {
        return outputs;
    }

    public int maxBatchSize() {
        return maxBatchSize;
    }

    public int maxSequenceLength() {
        return maxSequenceLength;
    }

    /** The largest batch a request may carry: the model's limit, capped by the server's. */
    public int batchLimit(int serverMaxBatch) {
        return Math.min(maxBatchSize, serverMaxBatch);
    }

    /** The longest sequence a request may carry, capped by the server's; 0 when the model has no sequence axis. */
    public int sequenceLimit(int serverMaxSequence) {
        return maxSequenceLength > 0 ? Math.min(maxSequenceLength, serverMaxSequence) : 0;
    }

    /**
     * Whether a request validated for {@code other} is valid for this model as it is: same name, version, inputs,
     * outputs, limits and class labels (a reload of an unchanged folder).
     */
    public boolean takesRequestsOf(ServedModel other) {
        return name.equals(other.name) && version.equals(other.version) && inputs.equals(other.inputs)
                && outputs.equals(other.outputs) && maxBatchSize == other.maxBatchSize
                && maxSequenceLength == other.maxSequenceLength && classLabels.equals(other.classLabels);
    }

    /** Device index to replica. */
    public Map<Integer, InferenceModel> replicas() {
        return replicas;
    }

    /** What this model did since it was loaded (the statistics extension and its meters). */
    public ModelStatistics statistics() {
        return statistics;
    }

    public boolean isReady() {
        return ready && !unloading;
    }

    /**
     * A request is about to use a replica: true if it may, false once an unload has begun. Paired
     * with {@link #beginUnload()}: the count is raised before the flag is read, and the flag set before
     * the count is read, so an unload that saw no running request cannot miss one that got in.
     */
    boolean enter() {
        running.incrementAndGet();
        if (unloading) {
            running.decrementAndGet();
            return false;
        }
        return true;
    }

    /** The request that {@link #enter()}ed is done with the replica. */
    void exit() {
        running.decrementAndGet();
    }

    /** No request may enter from now on; those running finish (see {@link #running()}). */
    void beginUnload() {
        unloading = true;
    }

    /** Whether an unload has begun: the model takes no new request. */
    boolean isUnloading() {
        return unloading;
    }

    /** Requests using a replica now. */
    int running() {
        return running.get();
    }

    /** Why the model is not served (its warm-up failed), or null. */
    public String failureReason() {
        return failureReason;
    }

    /** {@code READY}, {@code LOADING} (warm-up not finished), {@code UNLOADING} or {@code UNAVAILABLE}. */
    public String state() {
        return unloading ? "UNLOADING" : ready ? "READY" : failureReason != null ? "UNAVAILABLE" : "LOADING";
    }

    void markReady() {
        ready = true;
    }

    void markFailed(String reason) {
        failureReason = reason;
    }
}
