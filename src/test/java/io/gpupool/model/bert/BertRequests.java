package io.gpupool.model.bert;

import io.gpupool.model.BatchableModel;
import io.gpupool.model.DataType;
import io.gpupool.model.ExecutionContext;
import io.gpupool.model.HostTensor;
import io.gpupool.model.mlp.MlpModel;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.Set;
import java.util.function.BiFunction;
import java.util.function.Supplier;

import static io.gpupool.model.testing.Fixtures.floats;
import static io.gpupool.model.testing.Fixtures.maxAbsDiff;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * The requests the batching and request-arena tests send to the fixture models (host and GPU alike), and the check
 * they share: a batch gives every request what it gets alone. Requests are seeded, so every call builds the same.
 */
final class BertRequests {

    private BertRequests() {
    }

    /** One request's inputs and output selection. */
    record Request(List<HostTensor> inputs, Set<String> outputs) {
    }

    /** INT64 [batch, seq] random ids in [1, 100); a mask with {@code padded} trailing zeros per row; types 0/1. */
    static Request bert(long seed, int batch, int seq, int padded, boolean mask, boolean types, Set<String> outputs) {
        Random random = new Random(seed);
        long[] ids = new long[batch * seq];
        long[] m = new long[batch * seq];
        long[] t = new long[batch * seq];
        for (int i = 0; i < ids.length; i++) {
            boolean real = i % seq < seq - padded;
            ids[i] = real ? 1 + random.nextInt(99) : 0;
            m[i] = real ? 1 : 0;
            t[i] = i % seq >= seq / 2 ? 1 : 0;
        }
        long[] shape = {batch, seq};
        List<HostTensor> inputs = new ArrayList<>();
        inputs.add(new HostTensor(BertModel.INPUT_IDS, DataType.INT64, shape, MemorySegment.ofArray(ids)));
        if (mask) {
            inputs.add(new HostTensor(BertModel.ATTENTION_MASK, DataType.INT64, shape, MemorySegment.ofArray(m)));
        }
        if (types) {
            inputs.add(new HostTensor(BertModel.TOKEN_TYPE_IDS, DataType.INT64, shape, MemorySegment.ofArray(t)));
        }
        return new Request(inputs, outputs);
    }

    /** Five tiny-bert requests of mixed lengths (1 to 64 tokens), masks, token types and output selections. */
    static List<Request> mixedBertRequests() {
        return List.of(
                bert(1, 3, 10, 4, true, true, Set.of()),
                bert(2, 2, 5, 0, false, false, Set.of(BertModel.POOLER_OUTPUT)),
                bert(3, 1, 17, 3, true, false, Set.of(BertModel.LAST_HIDDEN_STATE)),
                bert(4, 1, 1, 0, false, true, Set.of()),
                bert(5, 4, 64, 20, true, true, Set.of(BertModel.POOLER_OUTPUT, BertModel.LAST_HIDDEN_STATE)));
    }

    /** The first three of {@link #mixedBertRequests()}: up to 17 tokens, every output selection. */
    static List<Request> shortBertRequests() {
        return mixedBertRequests().subList(0, 3);
    }

    /** Three requests for tiny-bert-cls (a classifier head and mean pooling). */
    static List<Request> clsBertRequests() {
        return List.of(
                bert(6, 2, 9, 2, true, true, Set.of()),
                bert(7, 1, 16, 0, false, false, Set.of()),
                bert(8, 3, 4, 1, true, false, Set.of()));
    }

    /** Four features per row, {@code rows.length / 4} rows, for iris-mlp. */
    static Request mlp(float[] rows, Set<String> outputs) {
        return new Request(List.of(new HostTensor(MlpModel.INPUT, DataType.FP32, new long[]{rows.length / 4, 4},
                MemorySegment.ofArray(rows))), outputs);
    }

    /** Three iris-mlp requests of 2, 1 and 3 rows: every output, then the label, then the probabilities. */
    static List<Request> irisRequests() {
        return List.of(
                mlp(new float[]{5.1f, 3.5f, 1.4f, 0.2f, 6.7f, 3.0f, 5.2f, 2.3f}, Set.of()),
                mlp(new float[]{5.9f, 3.0f, 4.2f, 1.5f}, Set.of(MlpModel.LABEL)),
                mlp(new float[]{4.9f, 3.1f, 1.5f, 0.1f, 6.3f, 2.5f, 5.0f, 1.9f, 5.5f, 2.4f, 3.8f, 1.1f},
                        Set.of(MlpModel.PROBABILITIES)));
    }

    /** Prepares every request of {@code batch} as a member of one batch of {@code model}. */
    static List<BatchableModel.Member> members(BatchableModel model, List<Request> batch) {
        List<BatchableModel.Member> members = new ArrayList<>();
        for (Request r : batch) {
            members.add(model.prepare(r.inputs(), r.outputs()));
        }
        return members;
    }

    /**
     * Runs all requests as one batch, then each alone through infer, and compares per request: the same outputs in
     * the same order and shapes, FP32 ones within {@code tolerance}, integer ones exactly.
     */
    static void assertBatchEqualsAlone(BatchableModel model, Supplier<ExecutionContext> context, List<Request> batch,
                                       double tolerance) {
        assertBatchEqualsAlone(model, model::inferBatch, context, batch, tolerance);
    }

    /** As above, the batch run by {@code runBatch} (e.g. padded to a graph's bucket) instead of inferBatch. */
    static void assertBatchEqualsAlone(BatchableModel model,
                                       BiFunction<List<BatchableModel.Member>, ExecutionContext,
                                               List<List<HostTensor>>> runBatch,
                                       Supplier<ExecutionContext> context, List<Request> batch, double tolerance) {
        List<BatchableModel.Member> members = members(model, batch);
        List<List<HostTensor>> together = runBatch.apply(members, context.get());
        assertThat(together).hasSameSizeAs(batch);
        for (int i = 0; i < batch.size(); i++) {
            List<HostTensor> alone = model.infer(batch.get(i).inputs(), batch.get(i).outputs(), context.get());
            List<HostTensor> batched = together.get(i);
            assertThat(batched).extracting(HostTensor::name).as("request %d's outputs", i)
                    .containsExactlyElementsOf(alone.stream().map(HostTensor::name).toList());
            for (int o = 0; o < alone.size(); o++) {
                assertThat(batched.get(o).shape()).as("request %d %s shape", i, alone.get(o).name())
                        .isEqualTo(alone.get(o).shape());
                assertThat(batched.get(o).dataType()).isEqualTo(alone.get(o).dataType());
                if (alone.get(o).dataType() == DataType.FP32) {
                    assertThat(maxAbsDiff(floats(alone.get(o)), floats(batched.get(o))))
                            .as("request %d %s", i, alone.get(o).name()).isLessThanOrEqualTo(tolerance);
                } else {
                    assertThat(batched.get(o).data().toArray(ValueLayout.JAVA_LONG))
                            .isEqualTo(alone.get(o).data().toArray(ValueLayout.JAVA_LONG));
                }
            }
        }
    }
}
