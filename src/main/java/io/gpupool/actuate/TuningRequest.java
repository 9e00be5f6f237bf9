package io.gpupool.actuate;

import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Set;

import io.gpupool.memory.PoolTuning;
import org.jspecify.annotations.Nullable;
import org.springframework.boot.convert.DurationStyle;
import org.springframework.util.unit.DataSize;

/**
 * Turns the fields of a tuning POST into a {@link PoolTuning}. Field names are those of
 * {@code memory.PoolConfig}, so the pool's own validation message names the field the operator sent.
 * Values arrive as text (JSON numbers as their decimal text); sizes may carry a unit ({@code 256MB}),
 * durations too ({@code 30s}, {@code PT30S}). This class only parses: ranges are the pool's business
 * ({@code PoolConfig} validates the whole result, and a rejected tuning changes nothing).
 *
 * <pre>
 *  field                      type       meaning
 *  localCacheBytesPerStream   size       cap of each stream's local cache
 *  localCacheCountPerClass    int        free blocks one local cache keeps per size class
 *  localIdleAge               duration   a local size class idle this long is flushed
 *  coalesceThreshold          int        free blocks of one order before a deferred merge
 *  releaseThresholdBytes      size       reserved bytes kept even when idle
 *  releaseIdleAge             duration   how long a chunk stays empty before it is returned
 *  growthStepBytes            size       size of the next lazily grown chunk
 *  maxGrowthStepBytes         size       growth steps double up to this
 *  capBytes                   size       most bytes reserved (0 = use capFraction)
 *  capFraction                double     cap as a fraction of device memory (sets capBytes to 0)
 *  mappedSlack                double     MAPPED growth: free mapped memory kept beyond the allocated
 *                                        high-water mark, as a fraction of it (default 0.0625)
 *  waitBeyondBudget           boolean    MAPPED growth: beyond the budget, wait for memory another
 *                                        stream freed rather than map more (default false)
 * </pre>
 */
public final class TuningRequest {

    /** The accepted field names, in the order above. */
    public static final Set<String> FIELDS = Set.of("localCacheBytesPerStream", "localCacheCountPerClass",
            "localIdleAge", "coalesceThreshold", "releaseThresholdBytes", "releaseIdleAge", "growthStepBytes",
            "maxGrowthStepBytes", "capBytes", "capFraction", "mappedSlack", "waitBeyondBudget");

    private TuningRequest() {
    }

    /**
     * Parses the given fields (absent or blank = unchanged).
     *
     * @throws TuningException naming the first field whose text does not parse, or when no field is given
     */
    public static PoolTuning parse(Map<String, @Nullable String> fields) {
        PoolTuning tuning = PoolTuning.none();
        boolean any = false;
        for (Map.Entry<String, @Nullable String> e : new LinkedHashMap<>(fields).entrySet()) {
            String text = e.getValue();
            if (text == null || text.isBlank()) {
                continue;
            }
            any = true;
            String field = e.getKey();
            text = text.trim();
            tuning = switch (field) {
                case "localCacheBytesPerStream" -> tuning.withLocalCacheBytesPerStream(size(field, text));
                case "localCacheCountPerClass" -> tuning.withLocalCacheCountPerClass(integer(field, text));
                case "localIdleAge" -> tuning.withLocalIdleAge(duration(field, text));
                case "coalesceThreshold" -> tuning.withCoalesceThreshold(integer(field, text));
                case "releaseThresholdBytes" -> tuning.withReleaseThresholdBytes(size(field, text));
                case "releaseIdleAge" -> tuning.withReleaseIdleAge(duration(field, text));
                case "growthStepBytes" -> tuning.withGrowthStepBytes(size(field, text));
                case "maxGrowthStepBytes" -> tuning.withMaxGrowthStepBytes(size(field, text));
                case "capBytes" -> tuning.withCapBytes(size(field, text));
                case "capFraction" -> tuning.withCapFraction(fraction(field, text));
                case "mappedSlack" -> tuning.withMappedSlack(number(field, text));
                case "waitBeyondBudget" -> tuning.withWaitBeyondBudget(bool(field, text));
                default -> throw new TuningException(field, text, "one of the fields " + FIELDS);
            };
        }
        if (!any) {
            throw new TuningException("body", "{}", "at least one of the fields " + FIELDS);
        }
        return tuning;
    }

    private static long size(String field, String text) {
        try {
            return DataSize.parse(text.replace(" ", "")).toBytes();
        }
        catch (IllegalArgumentException ex) {
            throw new TuningException(field, text, "a size: bytes (268435456) or with a unit (256MB)");
        }
    }

    private static int integer(String field, String text) {
        try {
            return Integer.parseInt(text);
        }
        catch (NumberFormatException ex) {
            throw new TuningException(field, text, "an integer");
        }
    }

    private static Duration duration(String field, String text) {
        try {
            return DurationStyle.detectAndParse(text);
        }
        catch (IllegalArgumentException ex) {
            throw new TuningException(field, text, "a duration such as 30s, 500ms or PT30S");
        }
    }

    private static double number(String field, String text) {
        try {
            return Double.parseDouble(text);
        }
        catch (NumberFormatException ex) {
            throw new TuningException(field, text, "a number such as 0.0625");
        }
    }

    private static boolean bool(String field, String text) {
        return switch (text.toLowerCase(java.util.Locale.ROOT)) {
            case "true" -> true;
            case "false" -> false;
            default -> throw new TuningException(field, text, "true or false");
        };
    }

    private static double fraction(String field, String text) {
        try {
            return Double.parseDouble(text);
        }
        catch (NumberFormatException ex) {
            throw new TuningException(field, text, "a fraction in (0, 1]");
        }
    }
}
