package io.gpupool.actuate;

import java.lang.reflect.Constructor;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.RecordComponent;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeSet;
import java.util.regex.Pattern;

import io.gpupool.memory.PoolTuning;
import org.jspecify.annotations.Nullable;
import org.springframework.boot.convert.DurationStyle;
import org.springframework.util.unit.DataSize;

/**
 * Binds the JSON body of a tuning POST to the typed {@link PoolTuning} that the endpoint and its web
 * extension take. The accepted fields are {@code PoolTuning}'s components, by name and in order; how a
 * field's text is read follows from the component's type, so adding a knob to {@code PoolTuning} makes
 * it tunable here without a second list:
 *
 * <pre>
 *  component type   accepted                                         example
 *  Long  (bytes)    whole bytes, or a whole number with a unit        268435456, "256MB"
 *  Integer          a whole number                                    20
 *  Duration         a number with a unit, or ISO-8601                 "30s", "500ms", "PT30S"
 *  Double           a decimal number, optionally with an exponent     0.5, 1e-3 (not "0.5d", "0x1p-3", "NaN")
 *  Boolean          true or false                                     true
 *  an enum          one of its constants, in any case                 "COLDEST_IN_ORDER"
 * </pre>
 *
 * A field may be a JSON number, string or boolean; a blank string leaves the component unchanged. A
 * field that is no component is refused by name, so a misspelt knob is never silently ignored. This
 * class only parses: ranges are the pool's business ({@code PoolConfig} validates the whole result,
 * and a rejected tuning changes nothing).
 */
public final class TuningRequest {

    private static final RecordComponent[] COMPONENTS = PoolTuning.class.getRecordComponents();

    /** The accepted field names: {@link PoolTuning}'s components, in declaration order. */
    public static final List<String> FIELDS = Arrays.stream(COMPONENTS).map(RecordComponent::getName).toList();

    /** A decimal number as JSON writes one; Java's extras (type suffixes, hex, NaN, Infinity) are refused. */
    private static final Pattern DECIMAL = Pattern.compile("[+-]?(\\d+\\.?\\d*|\\.\\d+)([eE][+-]?\\d+)?");

    private static final Constructor<PoolTuning> CANONICAL = canonicalConstructor();

    private TuningRequest() {
    }

    /**
     * Binds the body's fields (absent or blank = unchanged).
     *
     * @throws TuningException naming the unknown fields, or the first field whose value does not parse,
     *         or saying that no field was given
     */
    public static PoolTuning parse(Map<String, ? extends @Nullable Object> body) {
        TreeSet<String> unknown = new TreeSet<>(body.keySet());
        FIELDS.forEach(unknown::remove);
        if (!unknown.isEmpty()) {
            throw TuningException.unknownFields(unknown, FIELDS);
        }
        Object[] values = new Object[COMPONENTS.length];
        boolean any = false;
        for (int i = 0; i < COMPONENTS.length; i++) {
            Object raw = body.get(COMPONENTS[i].getName());
            String text = raw == null ? "" : String.valueOf(raw).trim();
            if (!text.isEmpty()) {
                values[i] = read(COMPONENTS[i], text);
                any = true;
            }
        }
        if (!any) {
            if (!body.isEmpty()) {                   // fields given, each null or blank: it would change nothing
                String field = body.keySet().iterator().next();
                throw new TuningException(field, String.valueOf(body.get(field)),
                        "a value (null or blank leaves a field unchanged, and this body changes no field)");
            }
            throw new TuningException("body", String.valueOf(body), "at least one of the fields " + FIELDS);
        }
        try {
            return CANONICAL.newInstance(values);
        }
        catch (InvocationTargetException ex) {
            throw ex.getCause() instanceof RuntimeException runtime ? runtime : new IllegalStateException(ex);
        }
        catch (ReflectiveOperationException ex) {
            throw new IllegalStateException(ex);
        }
    }

    private static Object read(RecordComponent component, String text) {
        String field = component.getName();
        Class<?> type = component.getType();
        if (type == Long.class) {
            return size(field, text);
        }
        if (type == Integer.class) {
            return integer(field, text);
        }
        if (type == Duration.class) {
            return duration(field, text);
        }
        if (type == Double.class) {
            return number(field, text);
        }
        if (type == Boolean.class) {
            return bool(field, text);
        }
        if (type.isEnum()) {
            return constant(field, type, text);
        }
        throw new IllegalStateException("PoolTuning." + field + " has type " + type.getName()
                + ", which a tuning request cannot read");
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
        if (!DECIMAL.matcher(text).matches()) {
            throw new TuningException(field, text, "a decimal number such as 0.0625");
        }
        double value = Double.parseDouble(text);
        if (Double.isInfinite(value)) {
            // refused here, while the text is at hand: past this point the value would read "Infinity"
            throw new TuningException(field, text, "a decimal number within the range of a double, such as 0.0625");
        }
        return value;
    }

    private static boolean bool(String field, String text) {
        return switch (text.toLowerCase(Locale.ROOT)) {
            case "true" -> true;
            case "false" -> false;
            default -> throw new TuningException(field, text, "true or false");
        };
    }

    private static Object constant(String field, Class<?> type, String text) {
        Object[] constants = type.getEnumConstants();
        for (Object constant : constants) {
            if (((Enum<?>) constant).name().equalsIgnoreCase(text)) {
                return constant;
            }
        }
        throw new TuningException(field, text, "one of " + Arrays.toString(constants));
    }

    private static Constructor<PoolTuning> canonicalConstructor() {
        Class<?>[] types = Arrays.stream(COMPONENTS).map(RecordComponent::getType).toArray(Class<?>[]::new);
        try {
            return PoolTuning.class.getDeclaredConstructor(types);
        }
        catch (NoSuchMethodException ex) {
            throw new IllegalStateException("a record has its canonical constructor", ex);
        }
    }
}
