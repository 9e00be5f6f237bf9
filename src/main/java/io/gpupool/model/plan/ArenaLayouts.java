package io.gpupool.model.plan;

import java.util.LinkedHashMap;
import java.util.Map;

/**
 * One plan's arena packings ({@link LifetimePacking}), one per request shape (batch, seq), computed on
 * first use and kept for the {@link #CAPACITY} shapes used most recently. Shapes vary per request (batch
 * 1-32 × sequence 16-512 under the default load), so an unbounded map would grow with the traffic; the
 * shapes a load repeats stay, and a miss costs one packing (tens of microseconds for a BERT-base plan).
 *
 * <p>Thread-safe: one monitor around the map, held for a lookup or an insert, never while packing (two
 * threads missing on one shape both pack it, with equal results, and the first insert stays).
 */
final class ArenaLayouts {

    /** Shapes kept per plan. */
    static final int CAPACITY = 256;

    /** Computes the packing of one shape. */
    @FunctionalInterface
    interface Packer {
        LifetimePacking pack(int batch, int seq);
    }

    private final Packer packer;

    /** Access-ordered, so the eldest entry is the least recently used. Guarded by {@code this}. */
    private final Map<Long, LifetimePacking> byShape = new LinkedHashMap<>(CAPACITY * 2, 0.75f, true) {
        @Override
        protected boolean removeEldestEntry(Map.Entry<Long, LifetimePacking> eldest) {
            return size() > CAPACITY;
        }
    };

    ArenaLayouts(Packer packer) {
        this.packer = packer;
    }

    /** The packing of (batch, seq), from the cache or packed now. */
    LifetimePacking get(int batch, int seq) {
        Long key = ((long) batch << 32) | (seq & 0xffff_ffffL);
        LifetimePacking known;
        synchronized (this) {
            known = byShape.get(key);
        }
        if (known != null) {
            return known;
        }
        LifetimePacking packed = packer.pack(batch, seq);
        synchronized (this) {
            LifetimePacking raced = byShape.putIfAbsent(key, packed);
            return raced != null ? raced : packed;
        }
    }

    /** Shapes held now. */
    synchronized int size() {
        return byShape.size();
    }
}
