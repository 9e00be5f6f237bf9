package io.gpupool.serving;

import io.gpupool.model.DataType;
import io.gpupool.model.HostTensor;
import io.gpupool.model.TensorSpec;
import io.gpupool.serving.fake.CountingAllocator;
import io.gpupool.serving.fake.FakeDevice;
import io.gpupool.serving.fake.TestModel;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import java.lang.foreign.MemorySegment;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * The warm-up's extra shapes (given where the kernels measure each GEMM shape on its first run): every model runs at
 * its largest size first, then once at each shape clipped to its own limits, each shape once; without extra shapes
 * only the largest size runs, as before.
 */
class WarmUpShapesTest {

    private final FakeDevice device = new FakeDevice(0);
    private final CountingAllocator allocator = new CountingAllocator(1L << 30);
    private final DeviceWorker worker = new DeviceWorker(device, allocator, null, 2, 8);
    private final DeviceRuntime runtime = new DeviceRuntime(device, allocator, allocator, null, worker);
    private final List<String> ran = new CopyOnWriteArrayList<>();

    @AfterEach
    void close() {
        worker.close();
    }

    /** Serves at most 4 × 64 tokens and records the shape of every call. */
    private ServedModel tokens() {
        TestModel model = new TestModel("tokens", 4, 64,
                List.of(new TensorSpec("ids", DataType.INT64, new long[]{-1, -1})),
                List.of(new TensorSpec("n", DataType.INT64, new long[]{1})),
                in -> {
                    long[] shape = in.getFirst().shape();
                    ran.add(shape[0] + "x" + shape[1]);
                    return List.of(new HostTensor("n", DataType.INT64, new long[]{1},
                            MemorySegment.ofArray(new long[]{shape[0] * shape[1]})));
                });
        return new ServedModel(new java.util.HashMap<>(Map.of(0, model)));
    }

    @Test
    void eachModelRunsAtItsLargestSizeThenAtEachShapeWithinItsLimits() {
        ServedModel model = tokens();
        ModelRegistry registry = new ModelRegistry(List.of(model), List.of());
        WarmUp warmUp = new WarmUp(registry, List.of(runtime), 64, 512, WarmUp.PoolSizing.NONE, List.of(
                new WarmUp.Shape(1, 16), new WarmUp.Shape(2, 128), new WarmUp.Shape(8, 16), new WarmUp.Shape(4, 64),
                new WarmUp.Shape(1, 16)));

        warmUp.run();

        // 2x128 clips to 2x64; 8x16 to 4x16; 4x64 is the largest size, already run; 1x16 once
        assertThat(ran).containsExactly("4x64", "1x16", "2x64", "4x16");
        assertThat(registry.isWarmedUp()).isTrue();
    }

    @Test
    void withoutExtraShapesOnlyTheLargestSizeRuns() {
        ModelRegistry registry = new ModelRegistry(List.of(tokens()), List.of());
        new WarmUp(registry, List.of(runtime), 64, 512).run();
        assertThat(ran).containsExactly("4x64");
        assertThatThrownBy(() -> new WarmUp.Shape(0, 16)).hasMessageContaining("batch and sequence >= 1");
    }
}
