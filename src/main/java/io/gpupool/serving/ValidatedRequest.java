package io.gpupool.serving;

import io.gpupool.model.DataType;

import java.time.Duration;
import java.util.List;

/**
 * An inference request that passed every check that needs no device memory: the model exists, every
 * input is declared, types and shapes agree with the model and the data, batch and sequence length
 * are within the limits. Input data is still on the Java heap; it becomes native memory only on the
 * worker thread that runs the request.
 *
 * @param outputs       the outputs to return, in response order, each with whether it travels as binary data
 * @param timeout       how long the request may take from submission to result
 */
public record ValidatedRequest(String id, ServedModel model, List<Input> inputs, List<Output> outputs,
                               Duration timeout) {

    /**
     * This request for {@code other}, a model that takes the same requests ({@link ServedModel#takesRequestsOf}),
     * within {@code remaining} (what is left of its timeout).
     */
    public ValidatedRequest on(ServedModel other, Duration remaining) {
        return new ValidatedRequest(id, other, inputs, outputs, remaining);
    }

    /** Rows in this request: dimension 0 of its first input where the model batches, else 1. */
    public int batchSize() {
        return (int) dimension(0, 1);
    }

    /** Dimension 1 of the first input where the model has a sequence axis, else 1. */
    public int sequenceLength() {
        return model.maxSequenceLength() > 0 ? (int) dimension(1, 1) : 1;
    }

    private long dimension(int axis, long otherwise) {
        if (inputs.isEmpty()) {
            return otherwise;
        }
        long[] declared = model.inputs().stream().filter(spec -> spec.name().equals(inputs.getFirst().name()))
                .findFirst().map(spec -> spec.shape()).orElse(new long[0]);
        long[] shape = inputs.getFirst().shape();
        return declared.length > axis && declared[axis] == -1 && shape.length > axis ? shape[axis] : otherwise;
    }

    /** One input: row-major little-endian bytes of exactly elementCount × element size. */
    public record Input(String name, DataType dataType, long[] shape, byte[] data) {
    }

    /**
     * One selected output.
     *
     * @param classification 0 for the output's values, else how many of each row's largest values to return as
     *                       the classification extension's text ({@link Classification})
     */
    public record Output(String name, boolean binary, int classification) {

        public Output(String name, boolean binary) {
            this(name, binary, 0);
        }
    }
}
