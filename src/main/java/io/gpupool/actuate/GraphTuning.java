package io.gpupool.actuate;

import io.gpupool.model.graph.GraphLimits;
import org.jspecify.annotations.Nullable;
import org.springframework.util.unit.DataSize;

import java.util.Locale;

/**
 * The graph fields of a tuning POST: {@code graphsEnabled} (true/false), {@code graphsMaxCount}
 * (0 to 4096) and {@code graphsMaxBytes} (a size, {@code 512MB}), the runtime names of
 * {@code gpupool.kernels.graphs.enabled / max-count / max-bytes}. Absent fields keep their value.
 */
final class GraphTuning {

    static final String ENABLED = "graphsEnabled";
    static final String MAX_COUNT = "graphsMaxCount";
    static final String MAX_BYTES = "graphsMaxBytes";

    private GraphTuning() {
    }

    /**
     * The graph fields of a tuning body, taken out of it before the rest binds to {@code PoolTuning} (which
     * refuses fields it does not know).
     */
    public record Fields(@Nullable String enabled, @Nullable String maxCount, @Nullable String maxBytes) {

        static final Fields NONE = new Fields(null, null, null);

        /** Removes the graph fields from {@code body} and returns them. */
        static Fields take(java.util.Map<String, Object> body) {
            return new Fields(text(body.remove(ENABLED)), text(body.remove(MAX_COUNT)), text(body.remove(MAX_BYTES)));
        }

        private static @Nullable String text(@Nullable Object value) {
            return value == null ? null : String.valueOf(value);
        }

        boolean any() {
            return GraphTuning.any(enabled, maxCount, maxBytes);
        }

        /** The first field given, in the order of the record: the one a refusal of them all names. */
        String firstGiven() {
            return given(enabled) ? ENABLED : given(maxCount) ? MAX_COUNT : MAX_BYTES;
        }

        /** The value given for {@code field}, as the body wrote it. */
        @Nullable String value(String field) {
            return switch (field) {
                case ENABLED -> enabled;
                case MAX_COUNT -> maxCount;
                default -> maxBytes;
            };
        }
    }

    static boolean any(@Nullable String enabled, @Nullable String maxCount, @Nullable String maxBytes) {
        return given(enabled) || given(maxCount) || given(maxBytes);
    }

    /**
     * The limits after applying the given fields to {@code current}.
     *
     * @throws TuningException naming the first field that does not parse or is out of range
     */
    static GraphLimits apply(GraphLimits current, @Nullable String enabled, @Nullable String maxCount,
                             @Nullable String maxBytes) {
        boolean on = current.enabled();
        int count = current.maxCount();
        long bytes = current.maxBytes();
        if (given(enabled)) {
            on = switch (enabled.trim().toLowerCase(Locale.ROOT)) {
                case "true" -> true;
                case "false" -> false;
                default -> throw TuningException.ofField(ENABLED, enabled, "true or false");
            };
        }
        if (given(maxCount)) {
            try {
                count = Integer.parseInt(maxCount.trim());
            } catch (NumberFormatException e) {
                throw TuningException.ofField(MAX_COUNT, maxCount, "an integer from 0 to " + GraphLimits.MAX_COUNT_LIMIT);
            }
            if (count < 0 || count > GraphLimits.MAX_COUNT_LIMIT) {
                throw TuningException.ofField(MAX_COUNT, maxCount, "an integer from 0 to " + GraphLimits.MAX_COUNT_LIMIT);
            }
        }
        if (given(maxBytes)) {
            try {
                bytes = DataSize.parse(maxBytes.replace(" ", "")).toBytes();
            } catch (IllegalArgumentException e) {
                throw TuningException.ofField(MAX_BYTES, maxBytes, "a size: bytes (536870912) or with a unit (512MB)");
            }
            if (bytes < 0) {
                throw TuningException.ofField(MAX_BYTES, maxBytes, "a size of at least 0");
            }
        }
        return new GraphLimits(on, count, bytes);
    }

    private static boolean given(@Nullable String text) {
        return text != null && !text.isBlank();
    }
}
