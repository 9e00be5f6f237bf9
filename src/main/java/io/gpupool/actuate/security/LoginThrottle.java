package io.gpupool.actuate.security;

import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.function.LongSupplier;

/**
 * Failed operator logins per client address, and how long each client must wait before its next try.
 *
 * <pre>
 *   failures in a row:   1 .. free-1   free      free+1    free+2   ...
 *   blocked for:         0             base      2 base    4 base   ... up to max
 * </pre>
 * A success clears the client's count. While a client is blocked its requests are refused without
 * checking the password (so blocked guessing costs nothing), and a block that has passed leaves the
 * count as it was, so the next failure doubles the wait again. A client's count is forgotten after
 * {@code max} without a failure.
 *
 * <p>The table holds at most {@code capacity} clients, least recently failed dropped first, so a
 * flood of addresses cannot grow memory. Synchronised: it is consulted only by requests that carry a
 * credential, never by inference or by anonymous reads.
 */
public final class LoginThrottle {

    /** Failures in a row a client gets without waiting. */
    private final int free;
    private final long baseNanos;
    private final long maxNanos;
    private final int capacity;
    private final LongSupplier clock;
    /** Guarded by this; access order, so the eldest entry is the client that failed least recently. */
    private final LinkedHashMap<String, Client> clients;

    private static final class Client {
        int failures;
        long lastFailureNanos;
        long blockedUntilNanos;
    }

    public LoginThrottle(int free, Duration base, Duration max, int capacity, LongSupplier nanoClock) {
        if (free < 1 || base.isNegative() || base.isZero() || max.compareTo(base) < 0 || capacity < 1) {
            throw new IllegalArgumentException("login throttle needs free >= 1, 0 < base <= max, capacity >= 1; got "
                    + free + ", " + base + ", " + max + ", " + capacity);
        }
        this.free = free;
        this.baseNanos = base.toNanos();
        this.maxNanos = max.toNanos();
        this.capacity = capacity;
        this.clock = nanoClock;
        this.clients = new LinkedHashMap<>(64, 0.75f, true) {
            @Override
            protected boolean removeEldestEntry(Map.Entry<String, Client> eldest) {
                return size() > LoginThrottle.this.capacity;
            }
        };
    }

    /** Five free failures, then 1 s doubling up to 5 min, for up to 10 000 client addresses. */
    public static LoginThrottle standard() {
        return new LoginThrottle(5, Duration.ofSeconds(1), Duration.ofMinutes(5), 10_000, System::nanoTime);
    }

    /** How long {@code client} must still wait, zero when it may try now. */
    public synchronized Duration remainingBlock(String client) {
        Client c = clients.get(client);
        if (c == null) {
            return Duration.ZERO;
        }
        long now = clock.getAsLong();
        if (now - c.lastFailureNanos > maxNanos && now - c.blockedUntilNanos > 0) {
            clients.remove(client);
            return Duration.ZERO;
        }
        long left = c.blockedUntilNanos - now;
        return left > 0 ? Duration.ofNanos(left) : Duration.ZERO;
    }

    /** Counts a failed login of {@code client}; answers its failures in a row and the block it now has. */
    public synchronized Failure failed(String client) {
        Client c = clients.computeIfAbsent(client, k -> new Client());
        long now = clock.getAsLong();
        c.failures++;
        c.lastFailureNanos = now;
        long block = 0;
        if (c.failures >= free) {
            int doublings = Math.min(c.failures - free, 30);
            block = Math.min(maxNanos, baseNanos << doublings);
            if (block < 0) {
                block = maxNanos;
            }
            c.blockedUntilNanos = now + block;
        }
        return new Failure(c.failures, Duration.ofNanos(block));
    }

    /** A successful login: the client starts afresh. */
    public synchronized void succeeded(String client) {
        clients.remove(client);
    }

    /** Clients the table holds now. */
    public synchronized int size() {
        return clients.size();
    }

    /** One failure as counted: failures in a row, and the wait it started (zero for none). */
    public record Failure(int inARow, Duration blocked) {
    }
}
