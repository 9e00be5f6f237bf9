package io.gpupool.memory.trace;

import io.gpupool.memory.AllocatorMode;
import io.gpupool.memory.DevicePool;
import io.gpupool.memory.GrowthPolicy;
import io.gpupool.memory.PoolConfig;
import io.gpupool.memory.bestfit.BestFitAllocator;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The allocation strategies the replay tool knows by name: the two-level pool and the global pool
 * alone, both with {@link PoolConfig#defaults()} (the cap fraction applies to the simulated
 * device), the best-fit baseline with its default 64 MiB growth step, and "two-level-lazy-256":
 * the two-level pool with the defaults before ON_DEMAND growth, kept for before/after comparisons.
 */
public final class ReplayStrategies {

    private static final Map<String, TraceReplayer.Strategy> BY_NAME = new LinkedHashMap<>();

    static {
        add(new TraceReplayer.Strategy("two-level", source -> new DevicePool(source, PoolConfig.defaults())));
        add(new TraceReplayer.Strategy("global-only",
                source -> new DevicePool(source, PoolConfig.defaults().withMode(AllocatorMode.GLOBAL_ONLY))));
        add(new TraceReplayer.Strategy("best-fit", BestFitAllocator::new));
        add(new TraceReplayer.Strategy("two-level-lazy-256", source -> new DevicePool(source, lazy256())));
    }

    private ReplayStrategies() {
    }

    /** The defaults before ON_DEMAND: LAZY growth doubling 256 MiB to 1 GiB, 256 MiB maximum block. */
    public static PoolConfig lazy256() {
        return PoolConfig.defaults().withGrowth(GrowthPolicy.LAZY, 0).withBlocks(2 * PoolConfig.MIB, 256 * PoolConfig.MIB);
    }

    private static void add(TraceReplayer.Strategy strategy) {
        BY_NAME.put(strategy.name(), strategy);
    }

    /** Every known strategy, in report order. */
    public static List<TraceReplayer.Strategy> all() {
        return List.copyOf(BY_NAME.values());
    }

    public static TraceReplayer.Strategy byName(String name) {
        TraceReplayer.Strategy strategy = BY_NAME.get(name);
        if (strategy == null) {
            throw new IllegalArgumentException("unknown strategy '" + name + "'; known: " + BY_NAME.keySet());
        }
        return strategy;
    }
}
