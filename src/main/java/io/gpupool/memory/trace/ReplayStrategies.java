package io.gpupool.memory.trace;

import io.gpupool.memory.bestfit.BestFitAllocator;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/** The allocation strategies the replay tool knows by name. */
public final class ReplayStrategies {

    private static final Map<String, TraceReplayer.Strategy> BY_NAME = new LinkedHashMap<>();

    static {
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
