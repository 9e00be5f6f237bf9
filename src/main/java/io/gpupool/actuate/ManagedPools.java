package io.gpupool.actuate;

import java.util.List;
import java.util.Optional;
import java.util.function.Supplier;

/**
 * The pools of all devices, in device order. Looked up on every call (not copied at start-up), so
 * devices that the serving layer opens late still appear.
 */
public final class ManagedPools {

    private final Supplier<List<ManagedPool>> pools;

    public ManagedPools(Supplier<List<ManagedPool>> pools) {
        this.pools = pools;
    }

    public static ManagedPools of(List<ManagedPool> pools) {
        List<ManagedPool> copy = List.copyOf(pools);
        return new ManagedPools(() -> copy);
    }

    public List<ManagedPool> all() {
        return pools.get();
    }

    /** The pool whose {@link ManagedPool#device()} equals {@code device}. */
    public Optional<ManagedPool> find(String device) {
        for (ManagedPool pool : pools.get()) {
            if (pool.device().equals(device)) {
                return Optional.of(pool);
            }
        }
        return Optional.empty();
    }
}
