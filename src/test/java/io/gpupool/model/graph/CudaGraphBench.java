package io.gpupool.model.graph;

import io.gpupool.backend.ComputeDevice;
import io.gpupool.backend.DeviceStream;
import io.gpupool.backend.MatmulLibrary;
import io.gpupool.backend.cuda.CudaBackend;
import io.gpupool.kernels.TensorOps;
import io.gpupool.kernels.cuda.CudaTensorOps;
import io.gpupool.memory.DeviceAllocator;
import io.gpupool.memory.PoolConfig;
import io.gpupool.memory.metric.AllocatorMode;
import io.gpupool.memory.pool.DevicePool;
import io.gpupool.model.ExecutionContext;
import io.gpupool.model.InferenceModel;
import io.gpupool.model.LoadTarget;
import io.gpupool.model.repository.ModelRepository;

import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.function.LongSupplier;
import java.util.function.UnaryOperator;

import static io.gpupool.model.testing.Fixtures.fixture;
import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

/**
 * The tiny BERT behind CUDA graphs on the first device, as the graph GPU tests use it: bound to the test's thread,
 * the two-level pool for activations, graph blocks and workspaces, weights in a direct allocator, {@link #STREAMS}
 * serving streams (the first loads the model) and the graphs of {@link DeviceGraphs#open} (its own capture thread and
 * stream). {@link #openOrSkip} skips the test (an assumption, not a failure) where there is no CUDA driver or device;
 * {@link #close} unloads the model, closes the graphs, the kernels and the streams, checks that the pool got every byte
 * back, and closes the pool, the weights and the backend also where that check fails.
 */
final class CudaGraphBench implements AutoCloseable {

    static final int STREAMS = 4;

    /** The kernels a test runs, made on the bench's device (workspaces, where they take any, from its pool). */
    @FunctionalInterface
    interface Kernels {
        CudaTensorOps open(ComputeDevice device, DevicePool pool);
    }

    final CudaBackend cuda;
    final ComputeDevice device;
    final DevicePool pool;
    final DeviceAllocator weights;
    final CudaTensorOps ops;
    final List<DeviceStream> streams = new ArrayList<>();
    final InferenceModel bert;
    final DeviceGraphs graphs;
    final InferenceModel graphed;

    private CudaGraphBench(CudaBackend cuda, Kernels kernels, UnaryOperator<TensorOps> planning, GraphLimits limits,
                           ShapeBuckets buckets) {
        this.cuda = cuda;
        device = cuda.devices().getFirst();
        device.bindToCurrentThread();
        pool = new DevicePool(device.chunkSource(), PoolConfig.defaults());
        weights = device.nativeAllocator(AllocatorMode.DIRECT).orElseThrow();
        ops = kernels.open(device, pool);
        for (int i = 0; i < STREAMS; i++) {
            streams.add(device.createStream(i));
        }
        bert = ModelRepository.loadModel("tiny-bert", fixture("tiny-bert"),
                new LoadTarget(streams.getFirst(), weights, planning.apply(ops)));
        graphs = DeviceGraphs.open(device, pool, limits, buckets, STREAMS).orElseThrow();
        graphed = graphs.wrap(bert);
    }

    /**
     * The bench of {@code kernels}, the model planned for {@code planning} of them, graphs within {@code limits} by
     * {@code buckets}; skips the test where there is no CUDA driver or device.
     */
    static CudaGraphBench openOrSkip(Kernels kernels, UnaryOperator<TensorOps> planning, GraphLimits limits,
                                     ShapeBuckets buckets) {
        Optional<CudaBackend> created = CudaBackend.tryCreate();
        assumeTrue(created.isPresent(), "no CUDA driver or device");
        try {
            return new CudaGraphBench(created.get(), kernels, planning, limits, buckets);
        } catch (RuntimeException | Error e) {
            created.get().close();                         // e.g. no cuBLASLt: the test fails, the device is let go
            throw e;
        }
    }

    /** The device's cuBLASLt; a GPU machine without it fails the test rather than skipping it. */
    static MatmulLibrary cublasLt(ComputeDevice device) {
        return device.matmulLibrary(null).orElseThrow(() ->
                new AssertionError("cuBLASLt could not be loaded on this GPU machine"));
    }

    /** {@code stream} over the pool with the bench's kernels. */
    ExecutionContext context(DeviceStream stream) {
        return new ExecutionContext(stream, pool, ops);
    }

    /** Unloads the graphed model: its graphs go, and with them every byte they held in the pool. */
    void assertUnloadFreesTheGraphsAndTheirPoolMemory() {
        graphed.close();
        assertThat(graphs.metrics().graphs()).isZero();
        assertThat(pool.metrics().allocatedBytes()).isZero();
    }

    /** Waits up to 20 s for {@code value} (a count the capture thread raises) to reach {@code expected}. */
    static void awaitAtLeast(LongSupplier value, long expected) throws InterruptedException {
        long deadline = System.nanoTime() + 20_000_000_000L;
        while (value.getAsLong() < expected && System.nanoTime() < deadline) {
            Thread.sleep(5);
        }
        assertThat(value.getAsLong()).isGreaterThanOrEqualTo(expected);
    }

    @Override
    public void close() {
        try {
            graphed.close();
            graphs.close();
            streams.forEach(DeviceStream::synchronize);
            ops.close();                                   // the serving streams' workspaces go back
            streams.forEach(DeviceStream::close);
            assertThat(pool.metrics().allocatedBytes()).as("pool bytes after unload and shutdown").isZero();
        } finally {
            pool.close();
            weights.close();
            cuda.close();
        }
    }
}
