package io.gpupool.serving;

/** A model that was found but is not served, and why (reported by the repository index). */
public record ModelFailure(String name, String version, String reason) {
}
