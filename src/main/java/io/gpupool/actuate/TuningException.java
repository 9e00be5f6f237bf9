package io.gpupool.actuate;

import java.util.regex.Matcher;
import java.util.regex.Pattern;

import io.gpupool.memory.metric.AllocatorMode;
import org.jspecify.annotations.Nullable;

/**
 * A runtime tuning that cannot be applied. Names the field (as the operator spelled it in the
 * request), the value given and what is allowed, so the 400 answer tells the operator what to fix.
 */
public class TuningException extends IllegalArgumentException {

    /** How {@code memory.PoolConfig} words its rejections: {@code gpupool.memory.F = V is invalid; allowed: A}. */
    private static final Pattern POOL_MESSAGE =
            Pattern.compile("gpupool\\.memory\\.(\\w+) = (.*) is invalid; allowed: (.*)", Pattern.DOTALL);

    private final @Nullable String field;
    private final @Nullable String value;
    private final @Nullable String allowed;

    public TuningException(String field, Object value, String allowed) {
        super("gpupool.memory." + field + " = " + value + " is invalid; allowed: " + allowed);
        this.field = field;
        this.value = String.valueOf(value);
        this.allowed = allowed;
    }

    private TuningException(IllegalArgumentException fromPool, @Nullable String field, @Nullable String value,
                            @Nullable String allowed) {
        super(fromPool.getMessage(), fromPool);
        this.field = field;
        this.value = value;
        this.allowed = allowed;
    }

    private TuningException(String message) {
        this(message, null, null, null);
    }

    private TuningException(String message, @Nullable String field, @Nullable String value,
                            @Nullable String allowed) {
        super(message);
        this.field = field;
        this.value = value;
        this.allowed = allowed;
    }

    /** Fields that are no tuning knob: named all at once, so that one answer lists every misspelling. */
    public static TuningException unknownFields(java.util.Collection<String> unknown, java.util.List<String> accepted) {
        String names = String.join(", ", unknown);
        return new TuningException("unknown tuning field" + (unknown.size() == 1 ? " " : "s ") + names
                + "; allowed: " + String.join(", ", accepted), names, null, String.join(", ", accepted));
    }

    /**
     * A tuning sent to a device whose allocator is not a pool ({@code mode} BEST_FIT, DIRECT or
     * CUDA_ASYNC): there is no configuration to change, whatever the fields.
     */
    public static TuningException noPool(AllocatorMode mode) {
        return new TuningException("mode " + mode + " has no pool to tune; gpupool.memory.mode="
                + AllocatorMode.TWO_LEVEL + " or " + AllocatorMode.GLOBAL_ONLY + " can be tuned");
    }

    /** A field outside the pool's configuration (the graph cache's) that does not parse or is out of range. */
    public static TuningException ofField(String field, Object value, String allowed) {
        return new TuningException(new IllegalArgumentException(field + " = " + value + " is invalid; allowed: "
                + allowed), field, String.valueOf(value), allowed);
    }

    /** Wraps the pool's own rejection, picking field, value and range out of its message when it has them. */
    public static TuningException fromPool(IllegalArgumentException ex) {
        if (ex instanceof TuningException tuning) {
            return tuning;
        }
        Matcher m = POOL_MESSAGE.matcher(String.valueOf(ex.getMessage()));
        return m.matches() ? new TuningException(ex, m.group(1), m.group(2), m.group(3))
                : new TuningException(ex, null, null, null);
    }

    /** The request field, e.g. {@code coalesceThreshold}; null when the pool did not name one. */
    public @Nullable String field() {
        return field;
    }

    /** The rejected value as given. */
    public @Nullable String value() {
        return value;
    }

    /** What would have been accepted, e.g. {@code [1, 1000000]}. */
    public @Nullable String allowed() {
        return allowed;
    }
}
