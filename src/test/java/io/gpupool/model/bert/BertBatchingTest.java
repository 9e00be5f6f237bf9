package io.gpupool.model.bert;

import io.gpupool.backend.DeviceStream;
import io.gpupool.kernels.TensorOps;
import io.gpupool.kernels.host.HostTensorOps;
import io.gpupool.model.BatchableModel;
import io.gpupool.model.DataType;
import io.gpupool.model.ExecutionContext;
import io.gpupool.model.HostTensor;
import io.gpupool.model.LoadTarget;
import io.gpupool.model.repository.ModelRepository;
import io.gpupool.model.mlp.MlpModel;
import io.gpupool.model.testing.TestStream;
import io.gpupool.model.testing.TrackingAllocator;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.Set;

import static io.gpupool.model.testing.Fixtures.fixture;
import static io.gpupool.model.testing.Fixtures.floats;
import static io.gpupool.model.testing.Fixtures.maxAbsDiff;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * A batch of requests (packed or padded) gives every request what it gets alone, whatever mix of lengths,
 * masks, token types and output selections; the batch's peak is the planned one; a malformed request is
 * rejected by {@code prepare} with the message a request alone gets.
 */
class BertBatchingTest {

    static final double TOLERANCE = 1e-5;

    final TestStream stream = new TestStream(0);
    final TrackingAllocator weights = new TrackingAllocator();
    final TrackingAllocator requests = new TrackingAllocator();
    final List<AutoCloseable> loaded = new ArrayList<>();

    @AfterEach
    void close() throws Exception {
        for (AutoCloseable model : loaded) {
            model.close();
        }
        assertThat(requests.outstandingBlocks()).as("activations released").isZero();
        stream.close();
        weights.close();
        requests.close();
    }

    BatchableModel load(String name, TensorOps ops) {
        BatchableModel model = (BatchableModel) ModelRepository.loadModel(name, fixture(name),
                new LoadTarget(stream, weights, ops));
        loaded.add(model);
        return model;
    }

    ExecutionContext context(TensorOps ops) {
        return new ExecutionContext(stream, requests, ops);
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

    static List<Request> mixedBertRequests() {
        return List.of(
                bert(1, 3, 10, 4, true, true, Set.of()),
                bert(2, 2, 5, 0, false, false, Set.of(BertModel.POOLER_OUTPUT)),
                bert(3, 1, 17, 3, true, false, Set.of(BertModel.LAST_HIDDEN_STATE)),
                bert(4, 1, 1, 0, false, true, Set.of()),
                bert(5, 4, 64, 20, true, true, Set.of(BertModel.POOLER_OUTPUT, BertModel.LAST_HIDDEN_STATE)));
    }

    /** Runs each request alone through infer, then all of them as one batch, and compares per request. */
    void assertBatchEqualsAlone(BatchableModel model, TensorOps ops, List<Request> batch) {
        assertBatchEqualsAlone(model, () -> context(ops), batch, TOLERANCE);
    }

    static void assertBatchEqualsAlone(BatchableModel model, java.util.function.Supplier<ExecutionContext> context,
                                       List<Request> batch, double tolerance) {
        List<BatchableModel.Member> members = new ArrayList<>();
        for (Request r : batch) {
            members.add(model.prepare(r.inputs(), r.outputs()));
        }
        List<List<HostTensor>> together = model.inferBatch(members, context.get());
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
                    assertThat(batched.get(o).data().toArray(java.lang.foreign.ValueLayout.JAVA_LONG))
                            .isEqualTo(alone.get(o).data().toArray(java.lang.foreign.ValueLayout.JAVA_LONG));
                }
            }
        }
    }

    @Test
    void packedBatchOfMixedLengthsMasksAndSelectionsEqualsEachRequestAlone() {
        HostTensorOps ops = new HostTensorOps();
        BatchableModel model = load("tiny-bert", ops);
        assertThat(model.batchLayout()).isEqualTo("packed");

        assertBatchEqualsAlone(model, ops, mixedBertRequests());
    }

    @Test
    void classifierAndMeanPoolingOutputsArePackedPerSequenceToo() {
        HostTensorOps ops = new HostTensorOps();
        BatchableModel model = load("tiny-bert-cls", ops);

        assertBatchEqualsAlone(model, ops, List.of(
                bert(6, 2, 9, 2, true, true, Set.of()),
                bert(7, 1, 16, 0, false, false, Set.of()),
                bert(8, 3, 4, 1, true, false, Set.of())));
    }

    @Test
    void withoutPackedKernelsTheBatchIsPaddedAndStillEqualsEachRequestAlone() {
        TensorOps ops = withoutPackedOps(new HostTensorOps());
        BatchableModel model = load("tiny-bert", ops);
        assertThat(model.batchLayout()).isEqualTo("padded");

        assertBatchEqualsAlone(model, ops, List.of(
                bert(1, 3, 10, 4, true, true, Set.of()),
                bert(2, 2, 5, 0, false, false, Set.of(BertModel.POOLER_OUTPUT)),
                bert(3, 1, 17, 3, true, false, Set.of(BertModel.LAST_HIDDEN_STATE))));
    }

    @Test
    void aPaddedBatchOfShortSequencesMayHoldMoreRowsThanTheLargestBatchAndStillEqualsEachRequestAlone() {
        TensorOps ops = withoutPackedOps(new HostTensorOps());
        BatchableModel model = load("tiny-bert", ops);
        List<Request> twelveRows = List.of(
                bert(1, 4, 6, 2, true, false, Set.of()),
                bert(2, 3, 3, 0, false, true, Set.of(BertModel.POOLER_OUTPUT)),
                bert(3, 4, 9, 0, false, false, Set.of(BertModel.LAST_HIDDEN_STATE)),
                bert(4, 1, 2, 1, true, true, Set.of()));
        List<BatchableModel.Member> members = new ArrayList<>();
        for (Request r : twelveRows) {
            members.add(model.prepare(r.inputs(), r.outputs()));
        }
        assertThat(model.fitsOneForward(members)).as("12 rows x 9 = 108 cells, within 8 x 64").isTrue();

        assertBatchEqualsAlone(model, ops, twelveRows);
    }

    @Test
    void aPaddedBatchNeverHoldsMoreCellsThanTheLargestRequestAlone() {
        BatchableModel model = load("tiny-bert", withoutPackedOps(new HostTensorOps()));
        BatchableModel.Member largest = model.prepare(bert(1, 8, 64, 0, false, false, Set.of()).inputs(), Set.of());
        BatchableModel.Member oneToken = model.prepare(bert(2, 1, 1, 0, false, false, Set.of()).inputs(), Set.of());
        BatchableModel.Member half = model.prepare(bert(3, 4, 64, 0, false, false, Set.of()).inputs(), Set.of());

        assertThat(model.fitsOneForward(List.of(half, half))).as("8 x 64: the largest request's cells").isTrue();
        assertThat(model.fitsOneForward(List.of(largest, oneToken))).as("9 rows padded to 64 > 8 x 64").isFalse();
        assertThat(model.fitsOneForward(List.of(half, half, oneToken))).isFalse();
    }

    @Test
    void aPackedBatchPeaksAtExactlyItsPlannedBytesAndReleasesThemAll() {
        HostTensorOps ops = new HostTensorOps();
        BatchableModel model = load("tiny-bert", ops);
        List<BatchableModel.Member> members = new ArrayList<>();
        for (Request r : mixedBertRequests()) {
            members.add(model.prepare(r.inputs(), r.outputs()));
        }
        requests.resetPeak();

        model.inferBatch(members, context(ops));

        assertThat(requests.peakBytes()).isEqualTo(model.batchPeakBytes(members));
        assertThat(requests.currentBytes()).isZero();
        assertThat(model.batchPeakBytes(members)).as("more members plan more")
                .isGreaterThan(model.batchPeakBytes(members.subList(0, 1)));
    }

    @Test
    void prepareRejectsWhatInferRejectsWithTheSameMessage() {
        HostTensorOps ops = new HostTensorOps();
        BatchableModel model = load("tiny-bert", ops);
        long[] ids = {2, 100, 3};
        List<HostTensor> outOfVocabulary = List.of(new HostTensor(BertModel.INPUT_IDS, DataType.INT64, new long[]{1, 3},
                MemorySegment.ofArray(ids)));

        Throwable alone = org.assertj.core.api.Assertions.catchThrowable(
                () -> model.infer(outOfVocabulary, Set.of(), context(ops)));
        assertThat(alone).isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> model.prepare(outOfVocabulary, Set.of()))
                .isInstanceOf(IllegalArgumentException.class).hasMessage(alone.getMessage());
        assertThatThrownBy(() -> model.prepare(bert(1, 1, 3, 0, false, false, Set.of()).inputs(), Set.of("logits")))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("has no output 'logits'");
    }

    @Test
    void mlpRowsConcatenatedGiveEachRequestItsOwnRowsAndSelection() {
        HostTensorOps ops = new HostTensorOps();
        BatchableModel model = load("iris-mlp", ops);
        assertThat(model).isInstanceOf(MlpModel.class);

        assertBatchEqualsAlone(model, ops, List.of(
                mlp(new float[]{5.1f, 3.5f, 1.4f, 0.2f, 6.7f, 3.0f, 5.2f, 2.3f}, Set.of()),
                mlp(new float[]{5.9f, 3.0f, 4.2f, 1.5f}, Set.of(MlpModel.LABEL)),
                mlp(new float[]{4.9f, 3.1f, 1.5f, 0.1f, 6.3f, 2.5f, 5.0f, 1.9f, 5.5f, 2.4f, 3.8f, 1.1f},
                        Set.of(MlpModel.PROBABILITIES))));
    }

    static Request mlp(float[] rows, Set<String> outputs) {
        return new Request(List.of(new HostTensor(MlpModel.INPUT, DataType.FP32, new long[]{rows.length / 4, 4},
                MemorySegment.ofArray(rows))), outputs);
    }

    /** The host kernels without their packed-sequence ops, as a backend that lacks them. */
    static TensorOps withoutPackedOps(TensorOps ops) {
        return new TensorOps() {
            @Override
            public void embeddingSum(DeviceStream stream, long inputIds, long tokenTypeIds, long wordTable,
                                     long positionTable, long tokenTypeTable, long out, int batch, int seq, int hidden) {
                ops.embeddingSum(stream, inputIds, tokenTypeIds, wordTable, positionTable, tokenTypeTable, out, batch,
                        seq, hidden);
            }

            @Override
            public void linear(DeviceStream stream, long x, long weight, long bias, long y, int rows, int in, int out,
                               Activation activation) {
                ops.linear(stream, x, weight, bias, y, rows, in, out, activation);
            }

            @Override
            public long attentionWorkspaceBytes(int batch, int seq, int heads, int headDim) {
                return ops.attentionWorkspaceBytes(batch, seq, heads, headDim);
            }

            @Override
            public void attention(DeviceStream stream, long qkv, long attentionMask, long workspace, long context,
                                  int batch, int seq, int heads, int headDim) {
                ops.attention(stream, qkv, attentionMask, workspace, context, batch, seq, heads, headDim);
            }

            @Override
            public void addLayerNorm(DeviceStream stream, long x, long residual, long gamma, long beta, long y, int rows,
                                     int cols, float eps) {
                ops.addLayerNorm(stream, x, residual, gamma, beta, y, rows, cols, eps);
            }

            @Override
            public void pool(DeviceStream stream, long hidden, long attentionMask, long out, int batch, int seq,
                             int cols, Pooling pooling) {
                ops.pool(stream, hidden, attentionMask, out, batch, seq, cols, pooling);
            }

            @Override
            public void softmax(DeviceStream stream, long x, long y, int rows, int cols) {
                ops.softmax(stream, x, y, rows, cols);
            }
        };
    }
}
