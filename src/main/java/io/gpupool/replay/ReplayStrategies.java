package io.gpupool.replay;

import io.gpupool.memory.BudgetReclaim;
import io.gpupool.memory.metric.AllocatorMode;
import io.gpupool.memory.pool.DevicePool;
import io.gpupool.memory.GrowthPolicy;
import io.gpupool.memory.PoolConfig;
import io.gpupool.memory.PoolTuning;
import io.gpupool.memory.ReclaimOrder;
import io.gpupool.memory.bestfit.BestFitAllocator;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * The allocation strategies the replay tool knows by name: the two-level pool and the global pool
 * alone, both with {@link PoolConfig#defaults()} (the cap fraction applies to the simulated
 * device), the same two with {@link PoolConfig#waitBeyondBudget()} ("two-level-wait", "global-only-wait"),
 * "two-level-server" and "global-only-server": as the server's application.yml sets them ({@link #server()}),
 * "two-level-periodic": the server's settings with the {@link BudgetReclaim#PERIODIC} budget reclaim (replay it with
 * {@code --maintain-every}),
 * "two-level-wait-coldest": waitBeyondBudget with the coldest-first reclaim and no hysteresis
 * ({@link ReclaimOrder#COLDEST_IN_ORDER}, {@link PoolConfig#reclaimHysteresis()} 0),
 * "two-level-extent-2m": the defaults with 2 MiB mapped extents ({@link PoolConfig#mappedExtentBytes()}),
 * the best-fit baseline with its default 64 MiB growth step, and "two-level-lazy-256":
 * the two-level pool with the defaults before ON_DEMAND growth, kept for before/after comparisons.
 */
public final class ReplayStrategies {

    private static final Map<String, TraceReplayer.Strategy> BY_NAME = new LinkedHashMap<>();

    static {
        add(new TraceReplayer.Strategy("two-level", source -> new DevicePool(source, PoolConfig.defaults())));
        add(new TraceReplayer.Strategy("global-only",
                source -> new DevicePool(source, PoolConfig.defaults().withMode(AllocatorMode.GLOBAL_ONLY))));
        add(new TraceReplayer.Strategy("two-level-wait",
                source -> new DevicePool(source, PoolConfig.defaults().withWaitBeyondBudget(true))));
        add(new TraceReplayer.Strategy("two-level-wait-coldest", source -> new DevicePool(source,
                PoolConfig.defaults().withWaitBeyondBudget(true).withReclaim(ReclaimOrder.COLDEST_IN_ORDER, 0))));
        add(new TraceReplayer.Strategy("global-only-wait", source -> new DevicePool(source,
                PoolConfig.defaults().withMode(AllocatorMode.GLOBAL_ONLY).withWaitBeyondBudget(true))));
        add(new TraceReplayer.Strategy("two-level-server", source -> new DevicePool(source, server())));
        add(new TraceReplayer.Strategy("two-level-periodic",
                source -> new DevicePool(source, server().withBudgetReclaim(BudgetReclaim.PERIODIC))));
        add(new TraceReplayer.Strategy("global-only-server",
                source -> new DevicePool(source, server().withMode(AllocatorMode.GLOBAL_ONLY))));
        add(new TraceReplayer.Strategy("two-level-extent-2m",
                source -> new DevicePool(source, PoolConfig.defaults().withMappedExtentBytes(2 * PoolConfig.MIB))));
        add(new TraceReplayer.Strategy("best-fit", BestFitAllocator::new));
        add(new TraceReplayer.Strategy("two-level-lazy-256", source -> new DevicePool(source, lazy256())));
        add(new TraceReplayer.Strategy("two-level-ondemand-64",
                source -> new DevicePool(source, onDemand(64 * PoolConfig.MIB))));
        add(new TraceReplayer.Strategy("two-level-ondemand-256",
                source -> new DevicePool(source, onDemand(256 * PoolConfig.MIB))));
    }

    private ReplayStrategies() {
    }

    /**
     * The pool as the server's application.yml sets it: {@link PoolConfig#waitBeyondBudget()} and
     * {@link BudgetReclaim#ON_MAP}, {@link ReclaimOrder#SMALL_CHUNKS_FIRST}.
     */
    public static PoolConfig server() {
        return PoolConfig.defaults().withWaitBeyondBudget(true).withBudgetReclaim(BudgetReclaim.ON_MAP)
                .withReclaim(ReclaimOrder.SMALL_CHUNKS_FIRST, PoolConfig.DEFAULT_RECLAIM_HYSTERESIS);
    }

    /** The defaults before ON_DEMAND: LAZY growth doubling 256 MiB to 1 GiB, 256 MiB maximum block. */
    public static PoolConfig lazy256() {
        return PoolConfig.defaults().withGrowth(GrowthPolicy.LAZY, 0).withBlocks(2 * PoolConfig.MIB, 256 * PoolConfig.MIB);
    }

    /** ON_DEMAND growth with a larger maximum block: fewer device allocations, more reserve. */
    public static PoolConfig onDemand(long maxBlockBytes) {
        return PoolConfig.defaults().withGrowth(GrowthPolicy.ON_DEMAND, 0).withBlocks(2 * PoolConfig.MIB, maxBlockBytes);
    }

    private static void add(TraceReplayer.Strategy strategy) {
        BY_NAME.put(strategy.name(), strategy);
    }

    /** Every known strategy, in report order. */
    public static List<TraceReplayer.Strategy> all() {
        return List.copyOf(BY_NAME.values());
    }

    /**
     * The pool strategies with {@code tuning} applied to the defaults, named {@code two-level*} and
     * {@code global-only*}; best-fit unchanged.
     */
    public static List<TraceReplayer.Strategy> tuned(PoolTuning tuning) {
        PoolConfig config = PoolConfig.defaults().apply(tuning);
        return List.of(
                new TraceReplayer.Strategy("two-level*", source -> new DevicePool(source, config)),
                new TraceReplayer.Strategy("global-only*",
                        source -> new DevicePool(source, config.withMode(AllocatorMode.GLOBAL_ONLY))),
                byName("best-fit"));
    }

    /**
     * Parses {@code key=value,...} into a {@link PoolTuning}. Keys: localCacheBytesPerStream,
     * localCacheCountPerClass, coalesceThreshold, growthStepBytes, maxGrowthStepBytes, mappedSlack,
     * waitBeyondBudget, reclaimOrder, reclaimHysteresis; byte values take k, m or g suffixes (powers of 1024).
     */
    public static PoolTuning parseTuning(String spec) {
        Long localBytes = null;
        Integer localCount = null;
        Integer coalesce = null;
        Long growth = null;
        Long maxGrowth = null;
        Double mappedSlack = null;
        Boolean waitBeyondBudget = null;
        ReclaimOrder reclaimOrder = null;
        Double reclaimHysteresis = null;
        for (String pair : spec.split(",")) {
            String[] kv = pair.split("=", 2);
            if (kv.length != 2) {
                throw new IllegalArgumentException("pool tuning entries are key=value, got '" + pair + "'");
            }
            String key = kv[0].strip();
            String value = kv[1].strip();
            switch (key) {
                case "localCacheBytesPerStream" -> localBytes = bytes(key, value);
                case "localCacheCountPerClass" -> localCount = Integer.parseInt(value);
                case "coalesceThreshold" -> coalesce = Integer.parseInt(value);
                case "growthStepBytes" -> growth = bytes(key, value);
                case "maxGrowthStepBytes" -> maxGrowth = bytes(key, value);
                case "mappedSlack" -> mappedSlack = Double.parseDouble(value);
                case "waitBeyondBudget" -> waitBeyondBudget = switch (value) {
                    case "true" -> true;
                    case "false" -> false;
                    default -> throw new IllegalArgumentException("waitBeyondBudget is true or false, got '" + value + "'");
                };
                case "reclaimOrder" -> reclaimOrder = ReclaimOrder.valueOf(value.toUpperCase(Locale.ROOT));
                case "reclaimHysteresis" -> reclaimHysteresis = Double.parseDouble(value);
                default -> throw new IllegalArgumentException("unknown pool tuning key '" + key + "'; known: "
                        + "localCacheBytesPerStream, localCacheCountPerClass, coalesceThreshold, growthStepBytes, "
                        + "maxGrowthStepBytes, mappedSlack, waitBeyondBudget, reclaimOrder, reclaimHysteresis");
            }
        }
        return new PoolTuning(localBytes, localCount, null, coalesce, null, null, growth, maxGrowth, null, null,
                mappedSlack, waitBeyondBudget, null, reclaimOrder, reclaimHysteresis);
    }

    private static long bytes(String key, String value) {
        String v = value.toLowerCase(Locale.ROOT);
        long unit = v.endsWith("k") ? 1L << 10 : v.endsWith("m") ? 1L << 20 : v.endsWith("g") ? 1L << 30 : 1;
        String digits = unit == 1 ? v : v.substring(0, v.length() - 1);
        try {
            return Math.multiplyExact(Long.parseLong(digits), unit);
        } catch (NumberFormatException | ArithmeticException e) {
            throw new IllegalArgumentException(key + " must be a byte count like 33554432 or 32m, got '" + value + "'");
        }
    }

    public static TraceReplayer.Strategy byName(String name) {
        TraceReplayer.Strategy strategy = BY_NAME.get(name);
        if (strategy == null) {
            throw new IllegalArgumentException("unknown strategy '" + name + "'; known: " + BY_NAME.keySet());
        }
        return strategy;
    }
}
