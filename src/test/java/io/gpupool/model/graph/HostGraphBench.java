package io.gpupool.model.graph;

import io.gpupool.backend.ComputeDevice;
import io.gpupool.backend.DeviceStream;
import io.gpupool.backend.host.HostBackend;
import io.gpupool.kernels.TensorOps;
import io.gpupool.kernels.host.HostTensorOps;
import io.gpupool.memory.DeviceAllocator;
import io.gpupool.memory.PoolConfig;
import io.gpupool.memory.metric.AllocatorMode;
import io.gpupool.memory.pool.DevicePool;
import io.gpupool.model.ExecutionContext;
import io.gpupool.model.InferenceModel;
import io.gpupool.model.LoadTarget;
import io.gpupool.model.repository.ModelRepository;

import java.util.concurrent.Executor;
import java.util.concurrent.ExecutorService;
import java.util.function.UnaryOperator;

import static io.gpupool.model.testing.Fixtures.fixture;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * The tiny BERT on the host backend with what the graph cache needs around it, for the host graph tests: a serving
 * stream (0), a graph stream (1), the two-level pool for activations and graph blocks, the host kernels and
 * {@link RecordingGraphCapture} as the capturing backend. One per test (held in an {@code @AutoClose} field);
 * {@link #close()} closes the graphs it opened, then the model, the serving stream, the pool, the weights and the
 * backend.
 */
final class HostGraphBench implements AutoCloseable {

    /** Graphs on, 16 of them at most, a GiB of graph memory: more than any host test reaches. */
    static final GraphLimits ON = new GraphLimits(true, 16, 1L << 30);

    final HostBackend host;
    final ComputeDevice device;
    final DeviceStream serving;
    final DeviceStream graphStream;
    final DevicePool pool;
    final DeviceAllocator weights;
    final HostTensorOps ops;
    final InferenceModel bert;
    final RecordingGraphCapture capture;
    private DeviceGraphs graphs;

    /** The model planned for the host kernels as they are. */
    HostGraphBench() {
        this(UnaryOperator.identity());
    }

    /** The model planned for {@code planning} of the host kernels (e.g. without packed-sequence ops). */
    HostGraphBench(UnaryOperator<TensorOps> planning) {
        host = new HostBackend();
        device = host.devices().getFirst();
        serving = device.createStream(0);
        graphStream = device.createStream(1);
        pool = new DevicePool(device.chunkSource(), PoolConfig.defaults());
        weights = device.nativeAllocator(AllocatorMode.DIRECT).orElseThrow();
        ops = new HostTensorOps();
        try (DeviceStream load = device.createStream(2)) {
            bert = ModelRepository.loadModel("tiny-bert", fixture("tiny-bert"),
                    new LoadTarget(load, weights, planning.apply(ops)));
        }
        capture = new RecordingGraphCapture(device);
    }

    /** Graphs {@link #ON} over the pool, captured on the calling thread. */
    DeviceGraphs openGraphs(ShapeBuckets buckets) {
        return openGraphs(pool, ON, buckets, Runnable::run, null);
    }

    /** Graphs whose blocks come from {@code blocks}, captured by {@code executor} ({@code owned}: closed with them). */
    DeviceGraphs openGraphs(DeviceAllocator blocks, GraphLimits limits, ShapeBuckets buckets, Executor executor,
                            ExecutorService owned) {
        graphs = new DeviceGraphs(device, capture, graphStream, blocks, limits, buckets, executor, owned);
        return graphs;
    }

    /** Closes the graphs opened last, before the bench closes. */
    void closeGraphs() {
        graphs.close();
        graphs = null;
    }

    /** The serving stream over the pool. */
    ExecutionContext context() {
        return new ExecutionContext(serving, pool, ops);
    }

    /** What an unload leaves: no graph, no live captured graph, not a byte in the pool. */
    void assertNothingLeftBehind() {
        assertThat(graphs.metrics().graphs()).isZero();
        assertThat(pool.metrics().allocatedBytes()).isZero();
        assertThat(capture.liveGraphs).hasValue(0);
    }

    @Override
    public void close() {
        if (graphs != null) {
            graphs.close();
        }
        bert.close();
        serving.close();
        pool.close();
        weights.close();
        host.close();
    }
}
