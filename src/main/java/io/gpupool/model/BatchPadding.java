package io.gpupool.model;

import io.gpupool.model.BatchableModel.Member;

import java.util.List;

/**
 * How a batchable model runs a batch of requests at a larger packed shape with the padding unseen, so that one
 * captured graph serves every batch that rounds up to its shape (see {@code model.graph.ShapeBuckets}): the batch
 * form of {@link ShapePadding}. A packed batch is its members' sequences concatenated, so its shape is two numbers,
 * the sequences N = Σ rows and the tokens T = Σ tokens; the padded run adds sequences and tokens that no real
 * sequence sees, and each member gets exactly what {@link BatchableModel#inferBatch} would give it.
 */
public interface BatchPadding {

    /** A packed batch's size: its sequences (the members' rows) and its tokens, summed. */
    record Shape(int sequences, int tokens) {

        /** The shape of {@code members} run as one packed forward. */
        public static Shape of(List<? extends Member> members) {
            int sequences = 0;
            int tokens = 0;
            for (Member member : members) {
                sequences = Math.addExact(sequences, member.rows());
                tokens = Math.addExact(tokens, member.tokens());
            }
            return new Shape(sequences, tokens);
        }
    }

    /**
     * The inputs the forward of {@code members} takes (an input no member gives is absent, which changes what the
     * forward enqueues), by name, sorted.
     */
    List<String> inputs(List<? extends Member> members);

    /** The outputs the forward of {@code members} computes and downloads: the union of their selections, sorted. */
    List<String> outputs(List<? extends Member> members);

    /**
     * Runs {@code members} as one forward at {@code padded} (at least their own {@link Shape#of shape} in both
     * numbers): the same work as {@link BatchableModel#inferBatch}, with every size, grid and host-side launch
     * parameter taken from {@code padded} and everything that depends on the members' own lengths in uploaded
     * inputs, so the device work depends on {@code padded}, {@link #inputs} and {@link #outputs} alone.
     *
     * @return per member, what {@link BatchableModel#inferBatch} returns for it
     */
    List<List<HostTensor>> inferPadded(List<? extends Member> members, Shape padded, ExecutionContext context);
}
