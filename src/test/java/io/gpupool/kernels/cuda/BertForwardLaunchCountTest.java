package io.gpupool.kernels.cuda;

import io.gpupool.backend.MatmulLibrary;
import io.gpupool.kernels.cuda.CudaTensorOpsLaunchTest.RecordingDevice;
import io.gpupool.kernels.cuda.CudaTensorOpsLaunchTest.RecordingStream;
import io.gpupool.model.DataType;
import io.gpupool.model.ExecutionContext;
import io.gpupool.model.HostTensor;
import io.gpupool.model.InferenceModel;
import io.gpupool.model.LoadTarget;
import io.gpupool.model.repository.ModelRepository;
import io.gpupool.serving.fake.CountingAllocator;
import org.junit.jupiter.api.Test;

import java.lang.foreign.MemorySegment;
import java.util.List;
import java.util.Set;

import static io.gpupool.model.testing.Fixtures.fixture;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * Kernel launches plus library calls of one BERT forward (the enqueue cost that dominates small shapes), counted on a
 * recording device with a recording cuBLASLt. The fixture (tiny-bert: 2 layers, a pooler, CLS serving pooling) has
 * the op sequence of BERT-base with 2 layers instead of 12: per layer qkv, attention, out-projection, add+LayerNorm,
 * FFN up, FFN down, add+LayerNorm (attention at its head size 16 adds a widening and a narrowing pass on bf16).
 */
class BertForwardLaunchCountTest {

    private static final int LAYERS = 2;

    private final RecordingDevice device = new RecordingDevice();
    private final RecordingStream stream = new RecordingStream(device);
    private final CountingAllocator memory = new CountingAllocator(1L << 34);

    @Test
    void residualInTheGemmMovesEachLayersTwoAddsIntoTheProductsAtTheSameLaunchCount() {
        CudaTensorOpsLibraryTest.RecordingLibrary library = new CudaTensorOpsLibraryTest.RecordingLibrary();
        long unfused = launchesPerForward(Precision.BF16, library, KernelOptions.DEFAULT);
        assertThat(stream.launches).filteredOn(l -> l.kernel().startsWith("add_layer_norm"))
                .as("add+LayerNorm reading the residual").hasSize(2 * LAYERS)
                .allSatisfy(l -> assertThat(l.arguments().get(1)).isNotEqualTo(0L));

        long fused = launchesPerForward(Precision.BF16, library, new KernelOptions(false, true, false));

        // add+LayerNorm was one launch already: the add moves into the product, the launch count stays
        assertThat(fused).isEqualTo(unfused);
        assertThat(library.runs).filteredOn(run -> run.residual() != 0).as("products adding a residual")
                .hasSize(2 * LAYERS);
        assertThat(stream.launches).filteredOn(l -> l.kernel().startsWith("add_layer_norm"))
                .as("LayerNorms left, none reading a residual").hasSize(2 * LAYERS)
                .allSatisfy(l -> assertThat(l.arguments().get(1)).isEqualTo(0L));
    }

    @Test
    void clsServingPoolingReusesThePoolersClsRowsInsteadOfASecondGather() {
        launchesPerForward(Precision.BF16, new CudaTensorOpsLibraryTest.RecordingLibrary(), KernelOptions.DEFAULT);
        assertThat(stream.launches).filteredOn(l -> l.kernel().startsWith("pool_")).extracting(
                CudaTensorOpsLaunchTest.Launch::kernel).containsExactly("pool_cls_bf16");
    }

    @Test
    void withoutTheLibraryTheOptionChangesNothing() {
        long plain = launchesPerForward(Precision.FP32, null, KernelOptions.DEFAULT);
        long asked = launchesPerForward(Precision.FP32, null, new KernelOptions(false, true, false));

        assertThat(asked).isEqualTo(plain);
        assertThat(stream.launches).filteredOn(l -> l.kernel().startsWith("add_layer_norm"))
                .allSatisfy(l -> assertThat(l.arguments().get(1)).isNotEqualTo(0L));
    }

    @Test
    void poolingAndThePoolerRunOnlyForTheOutputsARequestDownloads() {
        MatmulLibrary library = new CudaTensorOpsLibraryTest.RecordingLibrary();
        long all = launchesPerForward(Precision.BF16, library, KernelOptions.DEFAULT, Set.of());
        long hiddenOnly = launchesPerForward(Precision.BF16, library, KernelOptions.DEFAULT, Set.of("last_hidden_state"));
        assertThat(stream.launches).extracting(CudaTensorOpsLaunchTest.Launch::kernel)
                .noneMatch(kernel -> kernel.startsWith("pool_") || kernel.equals("activate_bf16"));

        // CLS gather, pooler product (a library call), its tanh pass, pooler_output's widening
        assertThat(all - hiddenOnly).isEqualTo(4);
    }

    private long launchesPerForward(Precision precision, MatmulLibrary library, KernelOptions options) {
        return launchesPerForward(precision, library, options, Set.of());
    }

    private long launchesPerForward(Precision precision, MatmulLibrary library, KernelOptions options,
                                    Set<String> outputs) {
        CudaTensorOps ops = new CudaTensorOps(device, precision, library, memory, options);
        try (InferenceModel model = ModelRepository.loadModel("tiny-bert", fixture("tiny-bert"),
                new LoadTarget(stream, memory, ops))) {
            ExecutionContext context = new ExecutionContext(stream, memory, ops);
            List<HostTensor> inputs = inputs(2, 12);
            model.infer(inputs, outputs, context);             // plans every product once
            library(library).ifPresent(l -> l.runs.clear());
            stream.launches.clear();
            long before = ops.launches();
            model.infer(inputs, outputs, context);
            long launches = ops.launches() - before;
            return launches;
        } catch (Exception e) {
            throw new AssertionError(e);
        } finally {
            ops.close();
        }
    }

    private static java.util.Optional<CudaTensorOpsLibraryTest.RecordingLibrary> library(MatmulLibrary library) {
        return library instanceof CudaTensorOpsLibraryTest.RecordingLibrary recording ? java.util.Optional.of(recording)
                : java.util.Optional.empty();
    }

    private static List<HostTensor> inputs(int batch, int seq) {
        long[] ids = new long[batch * seq];
        long[] mask = new long[batch * seq];
        for (int i = 0; i < ids.length; i++) {
            ids[i] = 1 + i % 50;
            mask[i] = 1;
        }
        long[] shape = {batch, seq};
        return List.of(new HostTensor("input_ids", DataType.INT64, shape, MemorySegment.ofArray(ids)),
                new HostTensor("attention_mask", DataType.INT64, shape, MemorySegment.ofArray(mask)));
    }
}
