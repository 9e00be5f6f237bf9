package io.gpupool.memory.source;

import io.gpupool.memory.ChunkSource;
import io.gpupool.memory.OutOfDeviceMemoryException;

import java.util.concurrent.atomic.AtomicLong;

/**
 * Caps the bytes an upstream {@link ChunkSource} may have reserved at once.
 *
 * <p>The cap is given in bytes or as a fraction of {@link ChunkSource#capacityBytes()} and can be
 * changed at runtime ({@link #setLimitBytes}, {@link #setLimitFraction}). Lowering the cap below
 * what is already reserved takes nothing back: it only refuses the next allocations until enough
 * chunks have been freed.
 *
 * <h2>Allocate, without a lock</h2>
 * <pre>
 *   1. after = reserved.addAndGet(bytes)          claim the bytes first (fetch-add)
 *   2. after &gt; limit?  reserved -= bytes; throw  roll back the claim, refuse
 *   3. upstream.allocate(bytes)                   may throw ...
 *   4.   ... on any throwable: reserved -= bytes; rethrow   (undo our own bookkeeping)
 * </pre>
 * Two threads racing near the cap may both be refused where one would have fitted; neither is
 * ever admitted beyond the cap. {@link #free} subtracts after the upstream has taken the chunk back.
 */
public final class LimitingChunkSource extends ForwardingChunkSource {

    /** Bytes currently reserved through this source (claims in flight included). */
    private final AtomicLong reserved = new AtomicLong();
    private volatile long limitBytes;

    private LimitingChunkSource(ChunkSource upstream, long limitBytes) {
        super(upstream);
        this.limitBytes = checkedLimit(limitBytes);
    }

    /** A cap of {@code limitBytes} (must be positive). */
    public static LimitingChunkSource ofBytes(ChunkSource upstream, long limitBytes) {
        return new LimitingChunkSource(upstream, limitBytes);
    }

    /** A cap of {@code fraction} (in (0, 1]) of the upstream's capacity. */
    public static LimitingChunkSource ofFraction(ChunkSource upstream, double fraction) {
        return new LimitingChunkSource(upstream, fractionToBytes(upstream, fraction));
    }

    @Override
    public long allocate(long bytes) {
        if (bytes <= 0) {
            throw new IllegalArgumentException("chunk size must be positive, got " + bytes);
        }
        long limit = limitBytes;
        long after = reserved.addAndGet(bytes);
        if (after > limit || after < 0) { // after < 0: the sum overflowed, which is above any cap
            reserved.addAndGet(-bytes);
            throw new OutOfDeviceMemoryException(bytes, "limit of " + name() + " reached: requested " + bytes
                    + " bytes, reserved " + (after - bytes) + " of the " + limit + "-byte cap");
        }
        try {
            return upstream.allocate(bytes);
        } catch (Throwable t) {
            reserved.addAndGet(-bytes);
            throw t;
        }
    }

    @Override
    public void free(long address, long bytes) {
        upstream.free(address, bytes);
        reserved.addAndGet(-bytes);
    }

    /** Mapped bytes count against the cap exactly as chunk bytes do (address space costs nothing). */
    @Override
    public void map(long address, long bytes, long extentBytes) {
        long limit = limitBytes;
        long after = reserved.addAndGet(bytes);
        if (after > limit || after < 0) {
            reserved.addAndGet(-bytes);
            throw new OutOfDeviceMemoryException(bytes, "limit of " + name() + " reached: mapping " + bytes
                    + " bytes, reserved " + (after - bytes) + " of the " + limit + "-byte cap");
        }
        try {
            upstream.map(address, bytes, extentBytes);
        } catch (Throwable t) {
            reserved.addAndGet(-bytes);
            throw t;
        }
    }

    @Override
    public void unmap(long address, long bytes) {
        upstream.unmap(address, bytes);
        reserved.addAndGet(-bytes);
    }

    /** The current cap in bytes. */
    public long limitBytes() {
        return limitBytes;
    }

    /** Bytes reserved through this source now. */
    public long reservedBytes() {
        return reserved.get();
    }

    /** Changes the cap; takes effect for the next allocation. */
    public void setLimitBytes(long limitBytes) {
        this.limitBytes = checkedLimit(limitBytes);
    }

    /** Changes the cap to {@code fraction} of the upstream's capacity. */
    public void setLimitFraction(double fraction) {
        this.limitBytes = fractionToBytes(upstream, fraction);
    }

    private static long checkedLimit(long limitBytes) {
        if (limitBytes <= 0) {
            throw new IllegalArgumentException("limitBytes must be positive, got " + limitBytes);
        }
        return limitBytes;
    }

    private static long fractionToBytes(ChunkSource upstream, double fraction) {
        if (!(fraction > 0.0 && fraction <= 1.0)) {
            throw new IllegalArgumentException("limit fraction must be in (0, 1], got " + fraction);
        }
        return checkedLimit((long) (fraction * upstream.capacityBytes()));
    }

    @Override
    public String toString() {
        return "LimitingChunkSource[" + name() + ", limit=" + limitBytes + ", reserved=" + reserved.get() + "]";
    }
}
