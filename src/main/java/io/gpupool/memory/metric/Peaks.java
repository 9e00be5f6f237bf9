package io.gpupool.memory.metric;

import java.util.concurrent.atomic.AtomicLong;

/** The high-water-mark update shared by the allocators' and sources' peak counters. */
public final class Peaks {

    private Peaks() {
    }

    /**
     * Raises {@code peak} to {@code value} if that is higher; lock-free. Unlike
     * {@code accumulateAndGet(value, Math::max)} it writes nothing when the peak already holds, so
     * the common case on the allocation path is one volatile read.
     */
    public static void raise(AtomicLong peak, long value) {
        long current = peak.get();
        while (value > current && !peak.compareAndSet(current, value)) {
            current = peak.get();
        }
    }
}
