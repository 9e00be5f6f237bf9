package io.gpupool.serving;

/**
 * A model that was found but is not served, and why (reported by the repository index).
 *
 * @param withdrawn true for a model that was served and then unloaded on request, false for one that never got
 *                  to serve (its files, its load or its warm-up failed)
 */
public record ModelFailure(String name, String version, String reason, boolean withdrawn) {

    /** A model that failed to load. */
    public ModelFailure(String name, String version, String reason) {
        this(name, version, reason, false);
    }
}
