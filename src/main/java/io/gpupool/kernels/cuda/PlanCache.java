package io.gpupool.kernels.cuda;

import io.gpupool.backend.MatmulLibrary.Matmul;

import java.util.function.Consumer;

/**
 * One stream's planned products, keyed by a packed shape ({@code rows << 40 | in << 24 | out << 8 | epilogue}), in
 * an open-addressing table of primitive keys so that a lookup on every linear layer allocates nothing (no boxed
 * key). Single-threaded: a stream runs one request at a time.
 * <pre>
 *   keys:  [ k0 | 0 | k2 | k3 | 0 | ... ]   0 = empty slot (no real key is 0: rows, in and out are positive)
 *   plans: [ p0 | . | p2 | p3 | . | ... ]   linear probing from mix(key) &amp; (capacity - 1); doubled at 1/2 full
 * </pre>
 */
final class PlanCache {

    private long[] keys = new long[16];
    private Matmul[] plans = new Matmul[16];
    private int size;

    /** The plan stored under {@code key}, or null. */
    Matmul get(long key) {
        int mask = keys.length - 1;
        for (int i = mix(key) & mask; ; i = (i + 1) & mask) {
            long k = keys[i];
            if (k == key) {
                return plans[i];
            }
            if (k == 0) {
                return null;
            }
        }
    }

    /** Stores {@code plan} under {@code key} (absent so far; {@code key} not 0). */
    void put(long key, Matmul plan) {
        if (2 * (size + 1) > keys.length) {
            grow();
        }
        insert(keys, plans, key, plan);
        size++;
    }

    int size() {
        return size;
    }

    void forEach(Consumer<Matmul> action) {
        for (Matmul plan : plans) {
            if (plan != null) {
                action.accept(plan);
            }
        }
    }

    private void grow() {
        long[] oldKeys = keys;
        Matmul[] oldPlans = plans;
        keys = new long[oldKeys.length * 2];
        plans = new Matmul[oldKeys.length * 2];
        for (int i = 0; i < oldKeys.length; i++) {
            if (oldKeys[i] != 0) {
                insert(keys, plans, oldKeys[i], oldPlans[i]);
            }
        }
    }

    private static void insert(long[] keys, Matmul[] plans, long key, Matmul plan) {
        int mask = keys.length - 1;
        int i = mix(key) & mask;
        while (keys[i] != 0) {
            i = (i + 1) & mask;
        }
        keys[i] = key;
        plans[i] = plan;
    }

    /** Spreads the packed fields over the low bits (a 64-bit multiplicative hash). */
    private static int mix(long key) {
        long h = key * 0x9E3779B97F4A7C15L;
        return (int) (h ^ (h >>> 32));
    }
}
