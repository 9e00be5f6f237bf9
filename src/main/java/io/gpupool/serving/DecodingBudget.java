package io.gpupool.serving;

import java.util.concurrent.atomic.AtomicLong;

/**
 * Bytes of request bodies being read and decoded at once, held to a maximum
 * ({@code gpupool.server.max-decoding-bytes}). A body is read whole and its JSON parsed into a tree
 * several times its size, so without a bound a handful of clients sending large bodies at once take the
 * heap; with it, a request that does not fit is answered 503 with {@code Retry-After} before its body
 * is read into memory. Lock-free: one compare-and-set loop per request.
 */
public final class DecodingBudget {

    private final long maxBytes;
    private final AtomicLong reserved = new AtomicLong();

    public DecodingBudget(long maxBytes) {
        if (maxBytes <= 0) {
            throw new IllegalArgumentException("decoding budget must be positive, got " + maxBytes);
        }
        this.maxBytes = maxBytes;
    }

    /** Takes {@code bytes} if they fit beside what is reserved now; false (and nothing taken) if not. */
    public boolean tryReserve(long bytes) {
        while (true) {
            long now = reserved.get();
            if (now + bytes > maxBytes) {
                return false;
            }
            if (reserved.compareAndSet(now, now + bytes)) {
                return true;
            }
        }
    }

    public void release(long bytes) {
        reserved.addAndGet(-bytes);
    }

    public long reserved() {
        return reserved.get();
    }

    public long maxBytes() {
        return maxBytes;
    }
}
