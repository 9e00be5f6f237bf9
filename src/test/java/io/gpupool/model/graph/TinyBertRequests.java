package io.gpupool.model.graph;

import io.gpupool.model.DataType;
import io.gpupool.model.HostTensor;

import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;

/**
 * Random client requests for the tiny BERT, [batch, seq] of INT64 each: ids below 100, an attention mask of 1 over a
 * random real length from each sequence's start (the client's own trailing padding) and token types by one of two
 * {@link TokenTypes rules}. The draws per sequence are fixed (its real length, then per token its id and, for
 * {@link TokenTypes#RANDOM}, its type), so a seed names one stream of requests whichever inputs a request leaves out.
 */
final class TinyBertRequests {

    /** How a request's token types are chosen. */
    enum TokenTypes {
        /** 0 for the first half of each sequence, 1 for the rest: no draw. */
        HALVES,
        /** 0 or 1 drawn per token. */
        RANDOM
    }

    private final Random random;
    private final TokenTypes types;

    TinyBertRequests(Random random, TokenTypes types) {
        this.random = random;
        this.types = types;
    }

    /** input_ids, attention_mask and token_type_ids. */
    List<HostTensor> inputs(int batch, int seq) {
        return inputs(batch, seq, true, true);
    }

    /** input_ids, then attention_mask where {@code mask}, then token_type_ids where {@code withTypes}. */
    List<HostTensor> inputs(int batch, int seq, boolean mask, boolean withTypes) {
        long[] ids = new long[batch * seq];
        long[] maskValues = new long[batch * seq];
        long[] typeValues = new long[batch * seq];
        for (int b = 0; b < batch; b++) {
            int real = 1 + random.nextInt(seq);
            for (int s = 0; s < seq; s++) {
                ids[b * seq + s] = random.nextInt(100);
                maskValues[b * seq + s] = s < real ? 1 : 0;
                typeValues[b * seq + s] = types == TokenTypes.RANDOM ? random.nextInt(2) : s < seq / 2 ? 0 : 1;
            }
        }
        List<HostTensor> inputs = new ArrayList<>();
        inputs.add(tensor("input_ids", batch, seq, ids));
        if (mask) {
            inputs.add(tensor("attention_mask", batch, seq, maskValues));
        }
        if (withTypes) {
            inputs.add(tensor("token_type_ids", batch, seq, typeValues));
        }
        return inputs;
    }

    /** One INT64 input of [batch, seq] holding {@code values}. */
    static HostTensor tensor(String name, int batch, int seq, long[] values) {
        return new HostTensor(name, DataType.INT64, new long[] {batch, seq}, MemorySegment.ofArray(values));
    }
}
