package io.gpupool.model.bert;

import io.gpupool.backend.ComputeDevice;
import io.gpupool.backend.DeviceStream;
import io.gpupool.backend.MatmulLibrary;
import io.gpupool.backend.cuda.CudaBackend;
import io.gpupool.kernels.TensorOps;
import io.gpupool.kernels.cuda.CudaTensorOps;
import io.gpupool.kernels.cuda.Precision;
import io.gpupool.kernels.cuda.KernelOptions;
import io.gpupool.memory.DeviceAllocator;
import io.gpupool.memory.metric.AllocatorMode;
import io.gpupool.model.BatchableModel;
import io.gpupool.model.LoadTarget;
import io.gpupool.model.repository.ModelRepository;
import org.junit.jupiter.api.Assumptions;

import java.util.Optional;

import static io.gpupool.model.testing.Fixtures.fixture;

/**
 * The first CUDA device as the GPU batching and request-arena tests use it: bound to the test's thread, weights in
 * a direct allocator, one stream. Where to take activations from is each test's own choice, handed to
 * {@link #close}. {@link #openOrSkip} and {@link #libraryOrSkip} skip the test (an assumption, not a failure) where
 * the driver, the device or cuBLASLt is missing.
 */
final class CudaModels {

    final CudaBackend cuda;
    final ComputeDevice device;
    final DeviceAllocator weights;
    final DeviceStream stream;

    private CudaModels(CudaBackend cuda) {
        this.cuda = cuda;
        this.device = cuda.devices().getFirst();
        device.bindToCurrentThread();
        this.weights = device.nativeAllocator(AllocatorMode.DIRECT).orElseThrow();
        this.stream = device.createStream(0);
    }

    /** Opens the first device, or skips the test where there is no CUDA driver or device. */
    static CudaModels openOrSkip() {
        Optional<CudaBackend> created = CudaBackend.tryCreate();
        Assumptions.assumeTrue(created.isPresent(), "no CUDA driver or device");
        return new CudaModels(created.get());
    }

    /** The fixture model {@code name} on {@code ops}, each request in one arena where {@code arena}; caller closes it. */
    BatchableModel load(String name, TensorOps ops, boolean arena) {
        return (BatchableModel) ModelRepository.loadModel(name, fixture(name),
                new LoadTarget(stream, weights, ops, arena));
    }

    /** The device's cuBLASLt, or skips the test where it cannot be loaded (no bf16 activations then). */
    MatmulLibrary libraryOrSkip() {
        MatmulLibrary library = device.matmulLibrary(null).orElse(null);
        Assumptions.assumeTrue(library != null, "cuBLASLt not loadable: no bf16 activations");
        return library;
    }

    /**
     * BF16 on bf16 activations through {@code library} (workspaces from {@code workspaces}) with the packed-sequence
     * ops on ({@code Options.packedBf16}); the caller closes them.
     */
    CudaTensorOps packedBf16Ops(MatmulLibrary library, DeviceAllocator workspaces) {
        return new CudaTensorOps(device, Precision.BF16, library, workspaces,
                new KernelOptions(true, false, KernelOptions.DEFAULT.warpLayerNorm()));
    }

    /**
     * Closes the stream, then {@code activations} (the test's allocator and its checks), then the weights and the
     * backend, also where closing the activations fails.
     */
    void close(AutoCloseable activations) throws Exception {
        stream.close();
        try {
            activations.close();
        } finally {
            weights.close();
            cuda.close();
        }
    }
}
