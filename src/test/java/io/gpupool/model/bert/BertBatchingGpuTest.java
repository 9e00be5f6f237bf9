package io.gpupool.model.bert;

import io.gpupool.backend.DeviceStream;
import io.gpupool.backend.MatmulLibrary;
import io.gpupool.kernels.TensorOps;
import io.gpupool.kernels.cuda.CudaTensorOps;
import io.gpupool.kernels.cuda.Precision;
import io.gpupool.memory.DeviceAllocator;
import io.gpupool.memory.metric.AllocatorMode;
import io.gpupool.model.BatchPadding;
import io.gpupool.model.BatchableModel;
import io.gpupool.model.ExecutionContext;
import io.gpupool.model.PaddedBatchPadding;
import io.gpupool.model.ShapePadding;
import io.gpupool.model.testing.WithoutPackedOps;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

import java.util.List;
import java.util.Set;

import static io.gpupool.model.bert.BertRequests.assertBatchEqualsAlone;
import static io.gpupool.model.bert.BertRequests.bert;
import static io.gpupool.model.bert.BertRequests.clsBertRequests;
import static io.gpupool.model.bert.BertRequests.mixedBertRequests;
import static io.gpupool.model.bert.BertRequests.shortBertRequests;
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

    CudaModels gpu;
    DeviceStream stream;
    DeviceAllocator requests;

    @BeforeEach
    void open() {
        gpu = CudaModels.openOrSkip();
        stream = gpu.stream;
        requests = gpu.device.nativeAllocator(AllocatorMode.CUDA_ASYNC)
                .or(() -> gpu.device.nativeAllocator(AllocatorMode.DIRECT)).orElseThrow();
    }

    @AfterEach
    void close() throws Exception {
        if (gpu == null) {
            return;
        }
        gpu.close(() -> {
            if (requests != gpu.weights) {
                requests.close();
            }
        });
    }

    BatchableModel load(String name, TensorOps ops) {
        return gpu.load(name, ops, false);
    }

    @Test
    void fp32BatchesArePackedAndEqualEachRequestAlone() {
        CudaTensorOps ops = new CudaTensorOps(gpu.device, Precision.FP32);
        try (BatchableModel model = load("tiny-bert", ops)) {
            assertThat(model.batchLayout()).isEqualTo("packed");
            assertBatchEqualsAlone(model, () -> new ExecutionContext(stream, requests, ops), mixedBertRequests(), 1e-5);
        }
        try (BatchableModel model = load("tiny-bert-cls", ops)) {
            assertBatchEqualsAlone(model, () -> new ExecutionContext(stream, requests, ops), clsBertRequests(), 1e-5);
        }
    }

    /**
     * The forward a batch graph replays, run eagerly on packed.cu: padded with empty sequences (one at T', whose CLS
     * row must not be read), a tail of tokens in no sequence, or both, each request within 1e-5 of alone.
     */
    @Test
    void fp32BatchesPaddedToABucketEqualEachRequestAlone() {
        CudaTensorOps ops = new CudaTensorOps(gpu.device, Precision.FP32);
        try (BatchableModel model = load("tiny-bert", ops)) {
            BatchPadding padding = model.batchPadding().orElseThrow();
            for (BatchPadding.Shape bucket : List.of(new BatchPadding.Shape(16, 384), new BatchPadding.Shape(16, 314),
                    new BatchPadding.Shape(11, 320))) {
                assertBatchEqualsAlone(model, (members, context) -> padding.inferPadded(members, bucket, context),
                        () -> new ExecutionContext(stream, requests, ops), mixedBertRequests(), 1e-5);
            }
        }
        try (BatchableModel model = load("tiny-bert-cls", ops)) {
            BatchPadding padding = model.batchPadding().orElseThrow();
            assertBatchEqualsAlone(model, (members, context) -> padding.inferPadded(members,
                    new BatchPadding.Shape(8, 64), context), () -> new ExecutionContext(stream, requests, ops),
                    clsBertRequests(), 1e-5);
        }
    }

    /**
     * The forward a padded-layout batch graph replays (the batch as a request of its bucket), run eagerly on the CUDA
     * kernels: at FP32 (planned without packed ops, so its batches are padded) padded by rows, columns or both, each
     * request within 1e-5 of alone, mean pooling and the classifier too; at BF16, production's padded layout, within
     * BF16's reach of alone.
     */
    @Test
    void paddedLayoutBatchesPaddedToARequestBucketEqualEachRequestAlone() {
        CudaTensorOps fp32 = new CudaTensorOps(gpu.device, Precision.FP32);
        List<ShapePadding.Shape> buckets = List.of(new ShapePadding.Shape(8, 32), new ShapePadding.Shape(8, 17),
                new ShapePadding.Shape(6, 32));
        try (BatchableModel model = load("tiny-bert", WithoutPackedOps.over(fp32))) {
            assertThat(model.batchLayout()).isEqualTo("padded");
            PaddedBatchPadding padding = model.paddedBatchPadding().orElseThrow();
            for (ShapePadding.Shape bucket : buckets) {
                assertBatchEqualsAlone(model, (members, context) -> padding.inferPadded(members, bucket, context),
                        () -> new ExecutionContext(stream, requests, fp32), shortBertRequests(), 1e-5);
            }
        }
        try (BatchableModel model = load("tiny-bert-cls", WithoutPackedOps.over(fp32))) {
            PaddedBatchPadding padding = model.paddedBatchPadding().orElseThrow();
            assertBatchEqualsAlone(model, (members, context) -> padding.inferPadded(members,
                    new ShapePadding.Shape(4, 16), context), () -> new ExecutionContext(stream, requests, fp32),
                    List.of(bert(6, 2, 9, 2, true, true, Set.of()), bert(8, 1, 4, 1, false, false, Set.of())), 1e-5);
        }
        CudaTensorOps bf16 = new CudaTensorOps(gpu.device, Precision.BF16);
        try (BatchableModel model = load("tiny-bert", bf16)) {
            PaddedBatchPadding padding = model.paddedBatchPadding().orElseThrow();
            for (ShapePadding.Shape bucket : buckets) {
                assertBatchEqualsAlone(model, (members, context) -> padding.inferPadded(members, bucket, context),
                        () -> new ExecutionContext(stream, requests, bf16), shortBertRequests(), BF16_TOLERANCE);
            }
        }
    }

    @Test
    void bf16BatchesFallBackToPaddingAndStayCloseToEachRequestAlone() {
        CudaTensorOps ops = new CudaTensorOps(gpu.device, Precision.BF16);
        try (BatchableModel model = load("tiny-bert", ops)) {
            assertThat(model.batchLayout()).isEqualTo("padded");
            assertBatchEqualsAlone(model, () -> new ExecutionContext(stream, requests, ops), shortBertRequests(), 1e-3);
        }
    }

    @Test
    void bf16ActivationsWithPackedBf16PackBatchesAndStayCloseToThePaddedBf16PathAlone() {
        MatmulLibrary library = gpu.libraryOrSkip();
        CudaTensorOps ops = gpu.packedBf16Ops(library, requests);
        CudaTensorOps padding = new CudaTensorOps(gpu.device, Precision.BF16, library, requests);
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
                assertBatchEqualsAlone(model, () -> new ExecutionContext(stream, requests, ops), clsBertRequests(),
                        BF16_TOLERANCE);
            }
        } finally {
            stream.synchronize();
            ops.close();
            padding.close();
        }
    }
}
