package io.gpupool.model.bert;

import io.gpupool.backend.DeviceStream;
import io.gpupool.kernels.TensorOps;
import io.gpupool.model.BatchableModel;
import io.gpupool.model.ExecutionContext;
import io.gpupool.model.LoadTarget;
import io.gpupool.model.repository.ModelRepository;
import io.gpupool.model.testing.TestStream;
import io.gpupool.model.testing.TrackingAllocator;

import java.util.ArrayList;
import java.util.List;

import static io.gpupool.model.testing.Fixtures.fixture;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * The fixture models on the host, as the batching and request-arena tests load them: one test stream, weights and
 * activations ({@link #requests}) in tracking allocators. {@link #close} closes every model loaded here and then
 * checks that every activation block was given back.
 */
final class HostModels implements AutoCloseable {

    final TestStream stream = new TestStream(0);
    final TrackingAllocator weights = new TrackingAllocator();
    /** Where requests take their activations. */
    final TrackingAllocator requests = new TrackingAllocator();
    private final List<AutoCloseable> loaded = new ArrayList<>();

    /** The fixture model {@code name} on {@code ops}, one block per tensor. */
    BatchableModel load(String name, TensorOps ops) {
        return load(name, ops, false);
    }

    /** The fixture model {@code name} on {@code ops}, each request in one arena where {@code arena}. */
    BatchableModel load(String name, TensorOps ops, boolean arena) {
        BatchableModel model = (BatchableModel) ModelRepository.loadModel(name, fixture(name),
                new LoadTarget(stream, weights, ops, arena));
        loaded.add(model);
        return model;
    }

    /** A request's context: the test stream, activations from {@link #requests}. */
    ExecutionContext context(TensorOps ops) {
        return new ExecutionContext(stream, requests, ops);
    }

    @Override
    public void close() throws Exception {
        for (AutoCloseable model : loaded) {
            model.close();
        }
        assertThat(requests.outstandingBlocks()).as("activations released").isZero();
        stream.close();
        weights.close();
        requests.close();
    }

    /** {@code ops} without their packed-sequence ops, as a backend that lacks them (batches are padded). */
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
