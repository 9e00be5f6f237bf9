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
     *
     * @return whether this call raised the peak
     */
    public static boolean raise(AtomicLong peak, long value) {
        long current = peak.get();
        while (value > current) {
            if (peak.compareAndSet(current, value)) {
                return true;
            }
            current = peak.get();
        }
        return false;
    }
}
