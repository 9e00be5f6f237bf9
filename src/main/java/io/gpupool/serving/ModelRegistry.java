package io.gpupool.serving;

import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentNavigableMap;
import java.util.concurrent.ConcurrentSkipListMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.regex.Pattern;

/**
 * The models this server serves, by name, plus those it found and could not serve. Names and
 * versions from URLs are checked against {@code [A-Za-z0-9_.-]+} (and never {@code .} or {@code ..})
 * before any lookup, so no path trick reaches the repository.
 */
public final class ModelRegistry implements AutoCloseable {

    private static final int MAX_NAME_LENGTH = 128;
    private static final Pattern SAFE_NAME = Pattern.compile("[A-Za-z0-9_.-]{1," + MAX_NAME_LENGTH + "}");

    /** Sorted by name; changed only by the repository extension ({@link #serve}, {@link #withdraw}). */
    private final ConcurrentNavigableMap<String, ServedModel> models;
    private final List<ModelFailure> failures;
    private volatile boolean warmedUp;

    public ModelRegistry(Collection<ServedModel> models, Collection<ModelFailure> failures) {
        Map<String, ServedModel> byName = new TreeMap<>();
        List<ModelFailure> problems = new ArrayList<>(failures);
        for (ServedModel model : models) {
            if (!isSafeName(model.name())) {
                problems.add(new ModelFailure(model.name(), model.version(), "model name must match [A-Za-z0-9_.-]+"));
            } else if (byName.putIfAbsent(model.name(), model) != null) {
                problems.add(new ModelFailure(model.name(), model.version(), "another model has the same name"));
            }
        }
        this.models = new ConcurrentSkipListMap<>(byName);
        this.failures = new CopyOnWriteArrayList<>(problems);
    }

    /**
     * Serves {@code model} (loaded and warmed up) under its name, in place of the model of that name
     * and of any failure recorded for it.
     *
     * @return the model it replaced, still open, or null
     */
    public ServedModel serve(ServedModel model) {
        failures.removeIf(failure -> failure.name().equals(model.name()));
        return models.put(model.name(), model);
    }

    /** Stops serving {@code model} (its replicas are the caller's to close); the index lists it with {@code reason}. */
    public void withdraw(ServedModel model, String reason) {
        models.remove(model.name(), model);
        failures.add(new ModelFailure(model.name(), model.version(), reason, true));
    }

    /**
     * Notes that a model failed to load on request, in place of what was noted for it before, so that the index and a
     * request for it say why; when the registry holds a model of that name (served, or one whose warm-up at start-up
     * failed, which the index lists with its own reason), that one stays and nothing is noted.
     */
    public void failedToLoad(ModelFailure failure) {
        if (models.containsKey(failure.name())) {
            return;
        }
        failures.removeIf(earlier -> earlier.name().equals(failure.name()));
        failures.add(failure);
    }

    /** The served model called {@code name}, or null (no validation; for lookups by known names). */
    public ServedModel served(String name) {
        return name == null ? null : models.get(name);
    }

    /** Combines what several sources loaded. */
    public static ModelRegistry of(List<ModelSource.Loaded> loaded) {
        List<ServedModel> models = new ArrayList<>();
        List<ModelFailure> failures = new ArrayList<>();
        for (ModelSource.Loaded part : loaded) {
            models.addAll(part.models());
            failures.addAll(part.failures());
        }
        return new ModelRegistry(models, failures);
    }

    public static boolean isSafeName(String name) {
        return name != null && SAFE_NAME.matcher(name).matches() && !name.equals(".") && !name.equals("..");
    }

    /**
     * The model named {@code name}, at {@code version} when that is not null.
     *
     * @throws ServingException 400 for a name or version outside {@code [A-Za-z0-9_.-]}, 404 when unknown
     */
    public ServedModel find(String name, String version) {
        if (!isSafeName(name)) {
            throw ServingException.badRequest("invalid model name '" + printable(name) + "': " + nameRule(name));
        }
        if (version != null && !isSafeName(version)) {
            throw ServingException.badRequest("invalid model version '" + printable(version) + "': " + nameRule(version));
        }
        ServedModel model = models.get(name);
        if (model == null) {
            ModelFailure failure = failures.stream().filter(f -> name.equals(f.name())).findFirst().orElse(null);
            if (failure != null && failure.withdrawn()) {
                throw ServingException.notFound("model '" + name + "' is not loaded: it was " + failure.reason());
            }
            throw ServingException.notFound("unknown model '" + name + "'"
                    + (failure == null ? "" : " (it failed to load: " + failure.reason() + ")"));
        }
        if (version != null && !version.equals(model.version())) {
            throw ServingException.notFound("model '" + name + "' has no version '" + version
                    + "' (served version: " + model.version() + ")");
        }
        return model;
    }

    public Collection<ServedModel> models() {
        return models.values();
    }

    public List<ModelFailure> failures() {
        return List.copyOf(failures);
    }

    /** True once every model's warm-up has finished (models that failed it are no longer served). */
    public boolean isWarmedUp() {
        return warmedUp;
    }

    void markWarmedUp() {
        warmedUp = true;
    }

    /** Frees every replica's weights. */
    @Override
    public void close() {
        for (ServedModel model : models.values()) {
            for (var replica : model.replicas().values()) {
                try {
                    replica.close();
                } catch (RuntimeException e) {
                    org.slf4j.LoggerFactory.getLogger(ModelRegistry.class)
                            .warn("Closing model '{}' failed: {}", model.name(), e.getMessage());
                }
            }
        }
    }

    /** Which rule of {@link #isSafeName} {@code text} breaks, in words. */
    private static String nameRule(String text) {
        if (text.length() > MAX_NAME_LENGTH) {
            return "it has " + text.length() + " characters; at most " + MAX_NAME_LENGTH + " are allowed";
        }
        if (text.isEmpty() || text.equals(".") || text.equals("..")) {
            return "a name must not be empty, '.' or '..'";
        }
        return "only letters, digits, '_', '.' and '-' are allowed";
    }

    private static String printable(String text) {
        if (text == null) {
            return "";
        }
        String cut = text.length() > 64 ? text.substring(0, 64) + "..." : text;
        return cut.replaceAll("[^\\x20-\\x7E]", "?");
    }
}
