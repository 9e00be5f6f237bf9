package io.gpupool.model.bert;

import io.gpupool.backend.ComputeDevice;
import io.gpupool.backend.DeviceStream;
import io.gpupool.backend.MatmulLibrary;
import io.gpupool.backend.cuda.CudaBackend;
import io.gpupool.kernels.cuda.CudaTensorOps;
import io.gpupool.memory.metric.AllocatorMode;
import io.gpupool.memory.DeviceAllocator;
import io.gpupool.model.BatchableModel;
import io.gpupool.model.ExecutionContext;
import io.gpupool.model.LoadTarget;
import io.gpupool.model.repository.ModelRepository;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

import java.util.List;
import java.util.Optional;
import java.util.Set;

import static io.gpupool.model.bert.BertBatchingTest.assertBatchEqualsAlone;
import static io.gpupool.model.bert.BertBatchingTest.bert;
import static io.gpupool.model.bert.BertBatchingTest.mixedBertRequests;
import static io.gpupool.model.testing.Fixtures.fixture;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * Batches on the CUDA kernels: at FP32 packed (packed.cu's varlen attention over offsets) and within 1e-5 of each
 * request alone; at BF16 padded (no varlen form of the tensor-core attention) and within BF16's reach of alone;
 * with bf16 activations and {@code packedBf16} packed on packed.cu's bf16 kernels, within BF16's reach of the padded
 * bf16 forward of each request alone. Skipped, not failed, where no driver or device (or no cuBLASLt) is present.
 */
@Tag("gpu")
class BertBatchingGpuTest {

    /** As GpuBf16ResidentOutputsTest's bound against FP32: what bf16 activations may move an output by. */
    static final double BF16_TOLERANCE = 5e-2;

    CudaBackend cuda;
    ComputeDevice device;
    DeviceStream stream;
    DeviceAllocator weights;
    DeviceAllocator requests;

    @BeforeEach
    void open() {
        Optional<CudaBackend> created = CudaBackend.tryCreate();
        Assumptions.assumeTrue(created.isPresent(), "no CUDA driver or device");
        cuda = created.get();
        device = cuda.devices().getFirst();
        device.bindToCurrentThread();
        weights = device.nativeAllocator(AllocatorMode.DIRECT).orElseThrow();
        requests = device.nativeAllocator(AllocatorMode.CUDA_ASYNC)
                .or(() -> device.nativeAllocator(AllocatorMode.DIRECT)).orElseThrow();
        stream = device.createStream(0);
    }

    @AfterEach
    void close() {
        if (cuda == null) {
            return;
        }
        stream.close();
        if (requests != weights) {
            requests.close();
        }
        weights.close();
        cuda.close();
    }

    BatchableModel load(String name, CudaTensorOps ops) {
        return (BatchableModel) ModelRepository.loadModel(name, fixture(name), new LoadTarget(stream, weights, ops));
    }

    @Test
    void fp32BatchesArePackedAndEqualEachRequestAlone() {
        CudaTensorOps ops = new CudaTensorOps(device, CudaTensorOps.Precision.FP32);
        try (BatchableModel model = load("tiny-bert", ops)) {
            assertThat(model.batchLayout()).isEqualTo("packed");
            assertBatchEqualsAlone(model, () -> new ExecutionContext(stream, requests, ops), mixedBertRequests(), 1e-5);
        }
        try (BatchableModel model = load("tiny-bert-cls", ops)) {
            assertBatchEqualsAlone(model, () -> new ExecutionContext(stream, requests, ops), List.of(
                    bert(6, 2, 9, 2, true, true, Set.of()),
                    bert(7, 1, 16, 0, false, false, Set.of()),
                    bert(8, 3, 4, 1, true, false, Set.of())), 1e-5);
        }
    }

    @Test
    void bf16BatchesFallBackToPaddingAndStayCloseToEachRequestAlone() {
        CudaTensorOps ops = new CudaTensorOps(device, CudaTensorOps.Precision.BF16);
        try (BatchableModel model = load("tiny-bert", ops)) {
            assertThat(model.batchLayout()).isEqualTo("padded");
            assertBatchEqualsAlone(model, () -> new ExecutionContext(stream, requests, ops), List.of(
                    bert(1, 3, 10, 4, true, true, Set.of()),
                    bert(2, 2, 5, 0, false, false, Set.of(BertModel.POOLER_OUTPUT)),
                    bert(3, 1, 17, 3, true, false, Set.of(BertModel.LAST_HIDDEN_STATE))), 1e-3);
        }
    }

    @Test
    void bf16ActivationsWithPackedBf16PackBatchesAndStayCloseToThePaddedBf16PathAlone() {
        MatmulLibrary library = device.matmulLibrary(null).orElse(null);
        Assumptions.assumeTrue(library != null, "cuBLASLt not loadable: no bf16 activations");
        CudaTensorOps ops = new CudaTensorOps(device, CudaTensorOps.Precision.BF16, library, requests,
                new CudaTensorOps.Options(true, false, CudaTensorOps.Options.DEFAULT.warpLayerNorm()));
        CudaTensorOps padding = new CudaTensorOps(device, CudaTensorOps.Precision.BF16, library, requests);
        try {
            assertThat(ops.activationBytes()).isEqualTo(2);
            try (BatchableModel padded = load("tiny-bert", padding)) {
                assertThat(padded.batchLayout()).as("packed-bf16 off").isEqualTo("padded");
            }
            // Alone, a request runs the padded plan of the same model: the batch is held against it.
            try (BatchableModel model = load("tiny-bert", ops)) {
                assertThat(model.batchLayout()).isEqualTo("packed");
                assertBatchEqualsAlone(model, () -> new ExecutionContext(stream, requests, ops), mixedBertRequests(),
                        BF16_TOLERANCE);
            }
            try (BatchableModel model = load("tiny-bert-cls", ops)) {
                assertBatchEqualsAlone(model, () -> new ExecutionContext(stream, requests, ops), List.of(
                        bert(6, 2, 9, 2, true, true, Set.of()),
                        bert(7, 1, 16, 0, false, false, Set.of()),
                        bert(8, 3, 4, 1, true, false, Set.of())), BF16_TOLERANCE);
            }
        } finally {
            stream.synchronize();
            ops.close();
            padding.close();
        }
    }
}
