package io.gpupool.model.graph;

import java.util.List;

/**
 * What a graph is recorded for: the model and the kernels it ran with (both by identity: other
 * kernels, e.g. another precision, enqueue other work), the padded shape, which inputs are present
 * after padding and which outputs were asked for (each changes what the forward enqueues).
 */
record GraphKey(Object model, Object ops, int batch, int sequence, List<String> inputs, List<String> outputs) {

    @Override
    public boolean equals(Object other) {
        return other instanceof GraphKey k && k.model == model && k.ops == ops && k.batch == batch
                && k.sequence == sequence && k.inputs.equals(inputs) && k.outputs.equals(outputs);
    }

    @Override
    public int hashCode() {
        int identity = System.identityHashCode(model) * 31 + System.identityHashCode(ops);
        return ((identity * 31 + batch) * 31 + sequence) * 31 + inputs.hashCode() * 7 + outputs.hashCode();
    }

    @Override
    public String toString() {
        return batch + "x" + sequence + " inputs " + inputs + " outputs " + (outputs.isEmpty() ? "all" : outputs);
    }
}
