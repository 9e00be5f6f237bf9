package io.gpupool.model.graph;

import java.util.List;

/**
 * What a graph is recorded for: the model (by identity), the padded shape, which inputs are present
 * after padding and which outputs were asked for (each changes what the forward enqueues).
 */
record GraphKey(Object model, int batch, int sequence, List<String> inputs, List<String> outputs) {

    @Override
    public boolean equals(Object other) {
        return other instanceof GraphKey k && k.model == model && k.batch == batch && k.sequence == sequence
                && k.inputs.equals(inputs) && k.outputs.equals(outputs);
    }

    @Override
    public int hashCode() {
        return ((System.identityHashCode(model) * 31 + batch) * 31 + sequence) * 31 + inputs.hashCode() * 7
                + outputs.hashCode();
    }

    @Override
    public String toString() {
        return batch + "x" + sequence + " inputs " + inputs + " outputs " + (outputs.isEmpty() ? "all" : outputs);
    }
}
