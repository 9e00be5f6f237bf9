package io.gpupool.serving;

import java.util.concurrent.atomic.AtomicLong;

/**
 * Bytes of request bodies being read and decoded at once, held to a maximum
 * ({@code gpupool.server.max-decoding-bytes}). A body is read whole and its JSON parsed into a tree
 * several times its size, so without a bound a handful of clients sending large bodies at once take the
 * heap; with it, a request that does not fit is answered 503 with {@code Retry-After}.
 *
 * <pre>
 *   request ──► hold()                 one Hold per request, given back whole when the request is done
 *     Content-Length n     take(n) before a byte is read: no room ─► 503 at once (the body is drained)
 *     no Content-Length    take(size) for each part as it arrives: no room ─► the rest is drained, 503 at its end
 *     decoded (inflated)   cover(decoded length): what an encoded body grew by, taken too: no room ─► 503
 * </pre>
 * A body without a length counts by what has arrived, not by the largest body allowed: otherwise a few clients
 * trickling a byte each of chunked bodies would hold the whole budget and every other request would be refused
 * for as long as they kept their connections. Lock-free: one compare-and-set loop per take.
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

    /** A new, empty hold for one request. */
    public Hold hold() {
        return new Hold();
    }

    /** The answer to a request whose body does not fit now. */
    ServingException exhausted() {
        return ServingException.unavailable("the server is already reading and decoding as many request bytes as "
                + "gpupool.server.max-decoding-bytes (" + maxBytes + ") allows; retry shortly", 1);
    }

    /**
     * What one request holds of the budget. Parts may be taken on the thread reading the body and the whole given back
     * on another (a cancelled request): a take after {@link #close} gives its bytes straight back and fails.
     */
    public final class Hold implements AutoCloseable {

        private static final long CLOSED = Long.MIN_VALUE;
        private final AtomicLong held = new AtomicLong();

        private Hold() {
        }

        /** Takes {@code bytes} more if they fit; false (and nothing more held) if not, or after close. */
        public boolean take(long bytes) {
            if (bytes <= 0) {
                return true;
            }
            if (!tryReserve(bytes)) {
                return false;
            }
            long now;
            do {
                now = held.get();
                if (now == CLOSED) {
                    release(bytes);
                    return false;
                }
            } while (!held.compareAndSet(now, now + bytes));
            return true;
        }

        /** Holds at least {@code bytes} in all, taking what is missing; false if that does not fit. */
        public boolean cover(long bytes) {
            long now = held.get();
            return now != CLOSED && (bytes <= now || take(bytes - now));
        }

        /** The answer to the request when a take or a cover did not fit. */
        ServingException exhausted() {
            return DecodingBudget.this.exhausted();
        }

        /** Gives everything held back; idempotent. */
        @Override
        public void close() {
            long now = held.getAndSet(CLOSED);
            if (now > 0) {
                release(now);
            }
        }
    }
}
