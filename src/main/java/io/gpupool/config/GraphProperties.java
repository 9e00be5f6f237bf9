package io.gpupool.config;

import io.gpupool.model.graph.GraphLimits;
import io.gpupool.model.graph.ShapeBuckets;
import org.springframework.boot.context.properties.ConfigurationProperties;
import org.springframework.util.unit.DataSize;

import java.util.ArrayList;
import java.util.List;

/**
 * {@code gpupool.kernels.graphs.*}: CUDA graphs of the models' forwards, captured per shape bucket on
 * first use and replayed afterwards (see {@code model.graph.DeviceGraphs}). Only CUDA devices have
 * graphs; on the host backend these settings have no effect. {@code enabled}, {@code max-count} and
 * {@code max-bytes} can be changed at runtime on {@code /actuator/gpupool/{device}} as
 * {@code graphsEnabled}, {@code graphsMaxCount} and {@code graphsMaxBytes}.
 */
@ConfigurationProperties("gpupool.kernels.graphs")
public class GraphProperties {

    static final String PREFIX = "gpupool.kernels.graphs.";

    /**
     * Replay captured graphs on CUDA devices (off: every request runs its kernels one launch at a time). Off by
     * default until the GPU checks of docs/benchmarks.md ("CUDA graphs on pool memory") pass with the cuBLASLt
     * engine under concurrent serving load; a capture that fails is counted, its shape stays eager.
     */
    private boolean enabled = false;

    /** Most graphs cached per device, 0 to 4096; the least recently used is evicted first. */
    private int maxCount = 64;

    /** Most pool memory the cached graphs' activations hold per device (counted in the pool and under its cap). */
    private DataSize maxBytes = DataSize.ofGigabytes(1);

    /**
     * Sequence lengths graphs are captured for, ascending; a request rounds up to the next (padding masked) and a
     * longer one runs eagerly. Only short shapes by default: a graph saves launch overhead, which matters while
     * the forward is short, whereas a large shape gains nothing and its capture and memory cost remain.
     */
    private List<Integer> sequenceBuckets = new ArrayList<>(List.of(16, 32, 64, 128));

    /**
     * Batch sizes graphs are captured for, ascending; a request rounds up to the next; a larger one runs eagerly. A
     * padded-layout batch of requests (dynamic batching on BF16 without packed-bf16) rounds its rows up here and its
     * longest sequence on {@code sequence-buckets}, and replays that request bucket's graph; its rows may exceed the
     * model's max_batch_size while the bucket's cells stay within the largest request's.
     */
    private List<Integer> batchBuckets = new ArrayList<>(List.of(1, 2, 4));

    /**
     * Total tokens graphs of packed batches (dynamic batching) are captured for, ascending; a batch rounds up to the
     * next (its sequences to the next power of two), one with more tokens runs eagerly; empty: batches always run
     * eagerly. Powers of two and their midpoints, so a batch pads at most 1.5x its tokens, up to where a forward is
     * long enough that the launches a graph saves are a small share of it (model.graph.ShapeBuckets explains).
     */
    private List<Integer> tokenBuckets = new ArrayList<>(List.of(16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512,
            768, 1024, 1536, 2048));

    /** The limits, validated; the message names the property. */
    GraphLimits toLimits() {
        if (maxCount < 0 || maxCount > GraphLimits.MAX_COUNT_LIMIT) {
            throw new IllegalArgumentException(PREFIX + "max-count = " + maxCount + " is out of range; allowed: 0 to "
                    + GraphLimits.MAX_COUNT_LIMIT);
        }
        if (maxBytes == null || maxBytes.isNegative()) {
            throw new IllegalArgumentException(PREFIX + "max-bytes = " + maxBytes + " is out of range; allowed: >= 0");
        }
        return new GraphLimits(enabled, maxCount, maxBytes.toBytes());
    }

    /** The buckets, validated; the message names the property. */
    ShapeBuckets toBuckets() {
        try {
            return new ShapeBuckets(batchBuckets, sequenceBuckets, tokenBuckets);
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException(PREFIX + e.getMessage());
        }
    }

    public boolean isEnabled() { return enabled; }
    public void setEnabled(boolean enabled) { this.enabled = enabled; }
    public int getMaxCount() { return maxCount; }
    public void setMaxCount(int maxCount) { this.maxCount = maxCount; }
    public DataSize getMaxBytes() { return maxBytes; }
    public void setMaxBytes(DataSize maxBytes) { this.maxBytes = maxBytes; }
    public List<Integer> getSequenceBuckets() { return sequenceBuckets; }
    public void setSequenceBuckets(List<Integer> sequenceBuckets) { this.sequenceBuckets = sequenceBuckets; }
    public List<Integer> getBatchBuckets() { return batchBuckets; }
    public void setBatchBuckets(List<Integer> batchBuckets) { this.batchBuckets = batchBuckets; }
    public List<Integer> getTokenBuckets() { return tokenBuckets; }
    public void setTokenBuckets(List<Integer> tokenBuckets) { this.tokenBuckets = tokenBuckets; }
}
