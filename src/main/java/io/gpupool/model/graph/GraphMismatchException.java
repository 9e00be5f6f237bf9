package io.gpupool.model.graph;

/**
 * A forward pass did not repeat what was captured for its shape (another allocation sequence, other
 * input copies). The graph cannot serve it; the request runs eagerly and the graph is dropped.
 */
final class GraphMismatchException extends RuntimeException {

    GraphMismatchException(String message) {
        super(message);
    }
}
