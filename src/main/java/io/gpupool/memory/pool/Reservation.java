package io.gpupool.memory.pool;

import io.gpupool.memory.ChunkSource;
import io.gpupool.memory.OutOfDeviceMemoryException;
import io.gpupool.memory.PoolConfig;
import io.gpupool.memory.metric.Peaks;

import java.util.Locale;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Supplier;

/**
 * The pool's cap and its reserved bytes: the one place where both live.
 *
 * <pre>
 *   0                         reserved                       cap = effectiveCapBytes(capacity)
 *   |#########################|..............................|
 *    chunks from the source,   room: takeCap(bytes) succeeds while reserved + bytes &lt;= cap
 *    or mapped memory (MAPPED)
 * </pre>
 * <ol>
 *   <li>take: {@link #takeCap} adds the bytes with one compare-and-set if the cap allows, else throws
 *       the out-of-memory exception naming the cap; the caller then obtains them from the source.</li>
 *   <li>the source refuses: the caller gives the bytes back ({@link #giveBack}).</li>
 *   <li>memory goes back to the source: {@link #giveBack}.</li>
 * </ol>
 * Lock-free; the reserved peak is exact (raised after every successful source call).
 */
final class Reservation {

    private final ChunkSource source;
    private final Supplier<PoolConfig> config;
    private final AtomicLong reserved = new AtomicLong();
    private final AtomicLong peak = new AtomicLong();

    Reservation(ChunkSource source, Supplier<PoolConfig> config) {
        this.source = source;
        this.config = config;
    }

    ChunkSource source() {
        return source;
    }

    long capBytes() {
        return config.get().effectiveCapBytes(source.capacityBytes());
    }

    long reserved() {
        return reserved.get();
    }

    long peak() {
        return peak.get();
    }

    void resetPeak() {
        peak.set(reserved.get());
    }

    /** Raises the peak to the bytes reserved now (after the source said yes). */
    void raisePeak() {
        Peaks.raise(peak, reserved.get());
    }

    /** Adds {@code bytes} to the reserved bytes if the cap allows; the caller then obtains or gives them back. */
    void takeCap(long bytes) {
        long cap = capBytes();
        while (true) {
            long current = reserved.get();
            if (current + bytes > cap) {
                throw new OutOfDeviceMemoryException(bytes, "the pool's cap of " + format(cap) + " would be exceeded ("
                        + format(current) + " reserved, " + format(bytes) + " more asked)");
            }
            if (reserved.compareAndSet(current, current + bytes)) {
                return;
            }
        }
    }

    void giveBack(long bytes) {
        reserved.addAndGet(-bytes);
    }

    /** Takes {@code bytes} of the cap and asks the source for a chunk; rolls back on refusal. */
    long allocateChunk(long bytes) {
        takeCap(bytes);
        try {
            long address = source.allocate(bytes);
            raisePeak();
            return address;
        } catch (RuntimeException e) {
            giveBack(bytes);
            throw e;
        }
    }

    /** Returns a chunk from {@link #allocateChunk} to the source. */
    void freeChunk(long address, long bytes) {
        source.free(address, bytes);
        giveBack(bytes);
    }

    static String format(long bytes) {
        if (bytes < 1024) {
            return bytes + " B";
        }
        String[] units = {"KiB", "MiB", "GiB", "TiB"};
        double value = bytes;
        int unit = -1;
        while (value >= 1024 && unit < units.length - 1) {
            value /= 1024;
            unit++;
        }
        return String.format(Locale.ROOT, "%.2f %s", value, units[unit]);
    }
}
