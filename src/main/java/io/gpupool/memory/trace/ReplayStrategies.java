package io.gpupool.memory.trace;

import io.gpupool.memory.AllocatorMode;
import io.gpupool.memory.DevicePool;
import io.gpupool.memory.PoolConfig;
import io.gpupool.memory.bestfit.BestFitAllocator;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The allocation strategies the replay tool knows by name: the two-level pool and the global pool
 * alone, both with {@link PoolConfig#defaults()} (the cap fraction applies to the simulated
 * device), and the best-fit baseline with its default 64 MiB growth step.
 */
public final class ReplayStrategies {

    private static final Map<String, TraceReplayer.Strategy> BY_NAME = new LinkedHashMap<>();

    static {
        add(new TraceReplayer.Strategy("two-level", source -> new DevicePool(source, PoolConfig.defaults())));
        add(new TraceReplayer.Strategy("global-only",
                source -> new DevicePool(source, PoolConfig.defaults().withMode(AllocatorMode.GLOBAL_ONLY))));
        add(new TraceReplayer.Strategy("best-fit", BestFitAllocator::new));
    }

    private ReplayStrategies() {
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
