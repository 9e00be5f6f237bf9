package io.gpupool.config;

import io.gpupool.backend.ComputeDevice;
import io.gpupool.memory.ChunkSource;
import io.gpupool.memory.source.FaultInjectingChunkSource;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;

/**
 * {@code gpupool.memory.fault-injection.*} (testing only): wraps each device's activation chunk source
 * in a {@link FaultInjectingChunkSource} that refuses a share of chunk requests with out-of-memory.
 *
 * <p>The sources start harmless and are {@linkplain #arm() armed} when the warm-up has finished, so
 * that an injected failure never marks a model unavailable at start-up: the faults hit live traffic
 * only, where the pool's recovery and the 507 answer are what is under test.
 */
public final class FaultInjection {

    private static final Logger log = LoggerFactory.getLogger(FaultInjection.class);

    private final double probability;
    private final long seed;
    private final List<FaultInjectingChunkSource> sources = new CopyOnWriteArrayList<>();

    FaultInjection(double probability, long seed) {
        this.probability = probability;
        this.seed = seed;
    }

    /** The device's chunk source, wrapped when fault injection is on. */
    ChunkSource chunksOf(ComputeDevice device) {
        if (probability == 0.0) {
            return device.chunkSource();
        }
        FaultInjectingChunkSource source = new FaultInjectingChunkSource(device.chunkSource());
        sources.add(source);
        return source;
    }

    /** Starts failing: from now on each chunk request fails with the configured probability. */
    void arm() {
        for (int i = 0; i < sources.size(); i++) {
            sources.get(i).failWithProbability(probability, seed + i);
        }
        if (!sources.isEmpty()) {
            log.warn("Fault injection is ON: {} % of chunk requests on {} device(s) fail with out-of-memory "
                    + "(seed {}); testing only", 100 * probability, sources.size(), seed);
        }
    }

    /** Stops failing (a test's checks after the faulty phase); the counters keep what was injected. */
    public void disarm() {
        for (int i = 0; i < sources.size(); i++) {
            sources.get(i).failWithProbability(0, seed + i);
        }
    }

    /** Failures injected so far on all devices. */
    public long injectedFailures() {
        return sources.stream().mapToLong(FaultInjectingChunkSource::injectedFailures).sum();
    }

    /** Chunk requests seen so far on all devices (failed or not). */
    public long chunkRequests() {
        return sources.stream().mapToLong(FaultInjectingChunkSource::calls).sum();
    }
}
