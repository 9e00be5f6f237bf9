package io.gpupool.memory.source;

import io.gpupool.memory.ChunkSource;
import io.gpupool.memory.OutOfDeviceMemoryException;
import io.gpupool.memory.VirtualMemory;

import java.util.SplittableRandom;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;

/**
 * Makes an upstream {@link ChunkSource} refuse allocations on purpose, to test out-of-memory
 * handling (unit tests, and the server's fault/soak mode).
 *
 * <p>Three triggers, combinable; a call fails if any of them fires:
 * <ol>
 *   <li><b>the Nth call</b> ({@link #failOnCall}): allocate call number {@code n} (1-based, counted
 *       from creation) fails once;</li>
 *   <li><b>every Nth call</b> ({@link #failEvery}): calls n, 2n, 3n, ... fail;</li>
 *   <li><b>probability</b> ({@link #failWithProbability}): each call fails with probability
 *       {@code p}, drawn from a random generator seeded by the caller, so a single-threaded run is
 *       reproducible.</li>
 * </ol>
 * An injected failure throws {@link OutOfDeviceMemoryException} (the same type a real device
 * refusal throws) without calling the upstream, so there is no bookkeeping to undo; a real failure
 * of the upstream passes through unchanged. {@link #free} is never failed: a pool must always be
 * able to give memory back. Triggers can be changed at runtime from any thread.
 */
public final class FaultInjectingChunkSource extends ForwardingChunkSource {

    private final AtomicLong calls = new AtomicLong();
    private final LongAdder injected = new LongAdder();
    private volatile long failOnCall;     // 0 = off
    private volatile long failEvery;      // 0 = off
    private volatile double probability;  // 0 = off
    /** Guarded by itself: SplittableRandom is not thread-safe. */
    private SplittableRandom random;

    public FaultInjectingChunkSource(ChunkSource upstream) {
        super(upstream);
        this.random = new SplittableRandom(0);
    }

    /** Makes allocate call number {@code n} (1-based, counted since creation) fail; 0 turns it off. */
    public FaultInjectingChunkSource failOnCall(long n) {
        if (n < 0) {
            throw new IllegalArgumentException("failOnCall must be >= 0 (0 = off), got " + n);
        }
        this.failOnCall = n;
        return this;
    }

    /** Makes every {@code n}th allocate call fail; 0 turns it off. */
    public FaultInjectingChunkSource failEvery(long n) {
        if (n < 0) {
            throw new IllegalArgumentException("failEvery must be >= 0 (0 = off), got " + n);
        }
        this.failEvery = n;
        return this;
    }

    /** Makes each allocate call fail with probability {@code p} in [0, 1], drawn from a generator seeded with {@code seed}. */
    public FaultInjectingChunkSource failWithProbability(double p, long seed) {
        if (!(p >= 0.0 && p <= 1.0)) {
            throw new IllegalArgumentException("failure probability must be in [0, 1], got " + p);
        }
        synchronized (this) {
            this.random = new SplittableRandom(seed);
        }
        this.probability = p;
        return this;
    }

    @Override
    public long allocate(long bytes) {
        long call = calls.incrementAndGet();
        if (shouldFail(call)) {
            injected.increment();
            throw new OutOfDeviceMemoryException(bytes, "injected failure of " + name() + " on allocate call "
                    + call + " (" + bytes + " bytes requested)");
        }
        return upstream.allocate(bytes);
    }

    private boolean shouldFail(long call) {
        long every = failEvery;
        if (call == failOnCall || (every > 0 && call % every == 0)) {
            return true;
        }
        double p = probability;
        if (p <= 0.0) {
            return false;
        }
        double draw;
        synchronized (this) {
            draw = random.nextDouble();
        }
        return draw < p;
    }

    /** Map calls (either kind) count and fail like allocations: a map is how a MAPPED pool obtains memory. */
    @Override
    protected VirtualMemory decorate(VirtualMemory upstreamMemory) {
        return new ForwardingVirtualMemory(upstreamMemory) {
            @Override
            public void map(long address, long bytes, long extentBytes) {
                long call = calls.incrementAndGet();
                if (shouldFail(call)) {
                    injected.increment();
                    throw new OutOfDeviceMemoryException(bytes, "injected failure of " + name() + " on map call "
                            + call + " (" + bytes + " bytes at 0x" + Long.toHexString(address) + ")");
                }
                upstream.map(address, bytes, extentBytes);
            }

            @Override
            public void mapPhysical(long address, long extentBytes, long[] handles, int count) {
                long call = calls.incrementAndGet();
                if (shouldFail(call)) {
                    injected.increment();
                    throw new OutOfDeviceMemoryException(count * extentBytes, "injected failure of " + name()
                            + " on map call " + call + " (" + count * extentBytes + " bytes at 0x"
                            + Long.toHexString(address) + ")");
                }
                upstream.mapPhysical(address, extentBytes, handles, count);
            }
        };
    }

    /** Allocate calls seen so far (failed or not). */
    public long calls() {
        return calls.get();
    }

    /** Failures injected so far. */
    public long injectedFailures() {
        return injected.sum();
    }
}
