package io.gpupool.model.graph;

import java.util.List;

/**
 * What a graph is recorded for: the model and the kernels it ran with (both by identity: other
 * kernels, e.g. another precision, enqueue other work), the padded shape, which inputs are present
 * after padding and which outputs were asked for (each changes what the forward enqueues). A request's
 * shape is (batch, sequence), and so is a padded-layout batch's (rows, longest sequence): the same forward,
 * so the two share a key. A packed batch's ({@code packed}) is (sequences, tokens), a forward of another
 * layout, so it never shares a graph with a request of the same two numbers.
 */
record GraphKey(Object model, Object ops, boolean packed, int batch, int sequence, List<String> inputs,
                List<String> outputs) {

    /** The key of a request padded to {@code batch} × {@code sequence}. */
    static GraphKey request(Object model, Object ops, int batch, int sequence, List<String> inputs,
                            List<String> outputs) {
        return new GraphKey(model, ops, false, batch, sequence, inputs, outputs);
    }

    /** The key of a packed batch padded to {@code sequences} and {@code tokens}. */
    static GraphKey packed(Object model, Object ops, int sequences, int tokens, List<String> inputs,
                           List<String> outputs) {
        return new GraphKey(model, ops, true, sequences, tokens, inputs, outputs);
    }

    @Override
    public boolean equals(Object other) {
        return other instanceof GraphKey k && k.model == model && k.ops == ops && k.packed == packed
                && k.batch == batch && k.sequence == sequence && k.inputs.equals(inputs) && k.outputs.equals(outputs);
    }

    @Override
    public int hashCode() {
        int identity = System.identityHashCode(model) * 31 + System.identityHashCode(ops);
        return (((identity * 31 + batch) * 31 + sequence) * 31 + inputs.hashCode() * 7 + outputs.hashCode()) * 2
                + (packed ? 1 : 0);
    }

    @Override
    public String toString() {
        return (packed ? "packed batch of " + batch + " sequences, " + sequence + " tokens" : batch + "x" + sequence)
                + " inputs " + inputs + " outputs " + (outputs.isEmpty() ? "all" : outputs);
    }
}
