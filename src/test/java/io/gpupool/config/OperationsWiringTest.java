package io.gpupool.config;

import io.gpupool.actuate.AllocatorAdapter;
import io.gpupool.actuate.DevicePoolAdapter;
import io.gpupool.actuate.ManagedPool;
import io.gpupool.backend.DeviceStream;
import io.gpupool.memory.metric.AllocatorMode;
import io.gpupool.memory.DeviceBlock;
import io.gpupool.memory.bestfit.BestFitAllocator;
import io.gpupool.serving.DeviceRuntime;
import io.gpupool.serving.ServingDevices;
import org.junit.jupiter.api.Test;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.jackson.autoconfigure.JacksonAutoConfiguration;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;

import static org.assertj.core.api.Assertions.assertThat;

/** Which {@link ManagedPool} each mode's allocator is published as on the operations side. */
class OperationsWiringTest {

    private static final long MIB = 1L << 20;

    private final ApplicationContextRunner runner = new ApplicationContextRunner()
            .withConfiguration(AutoConfigurations.of(JacksonAutoConfiguration.class))
            .withUserConfiguration(GpuPoolConfiguration.class)
            .withPropertyValues("gpupool.backend=host", "gpupool.serving.warm-up=false",
                    "gpupool.models.path=does-not-exist");

    @Test
    void everyHostModeIsPublishedAndOnlyThePoolModesCarryAConfiguration() {
        for (AllocatorMode mode : new AllocatorMode[] {AllocatorMode.TWO_LEVEL, AllocatorMode.GLOBAL_ONLY,
                AllocatorMode.BEST_FIT, AllocatorMode.DIRECT}) {
            runner.withPropertyValues("gpupool.memory.mode=" + mode).run(context -> {
                DeviceRuntime device = context.getBean(ServingDevices.class).devices().getFirst();
                ManagedPool pool = OperationsWiring.managedPool("host:0", device);
                assertThat(pool.metrics().mode()).as(mode.name()).isEqualTo(mode);
                assertThat(pool.device()).isEqualTo("host:0");
                assertThat(pool.trace()).as("the trace decorator is unwrapped, recording still offered").isPresent();
                boolean isPool = mode == AllocatorMode.TWO_LEVEL || mode == AllocatorMode.GLOBAL_ONLY;
                assertThat(pool).isInstanceOf(isPool ? DevicePoolAdapter.class : AllocatorAdapter.class);
                assertThat(pool.configuration() != null).as(mode + " has a pool configuration").isEqualTo(isPool);
            });
        }
    }

    /** Best-fit keeps free memory inside its chunks: the view shows it, and trim gives wholly free chunks back. */
    @Test
    void bestFitShowsItsChunksFreeMemoryAndTrimReleasesThem() {
        runner.withPropertyValues("gpupool.memory.mode=BEST_FIT").run(context -> {
            DeviceRuntime device = context.getBean(ServingDevices.class).devices().getFirst();
            ManagedPool pool = OperationsWiring.managedPool("host:0", device);
            try (DeviceStream stream = device.device().createStream(0)) {
                DeviceBlock block = device.allocator().allocate(MIB, stream);
                long chunk = BestFitAllocator.DEFAULT_CHUNK_BYTES;
                assertThat(pool.metrics().reservedBytes()).isEqualTo(chunk);
                assertThat(pool.metrics().allocatedBytes()).isEqualTo(MIB);
                assertThat(pool.metrics().globalFreeBytes()).isEqualTo(chunk - MIB);
                assertThat(pool.metrics().largestFreeBlockBytes()).isEqualTo(chunk - MIB);
                block.release();
                assertThat(pool.trim()).isEqualTo(chunk);
                assertThat(pool.metrics().reservedBytes()).isZero();
                assertThat(pool.metrics().peakReservedBytes()).isEqualTo(chunk);
            }
        });
    }

    /** The measured GEMM shapes reach the endpoint sorted by shape, a time nothing measured as null (JSON has no NaN). */
    @Test
    void measuredGemmShapesArePublishedSortedWithUnmeasuredTimesAsNull() {
        java.util.List<io.gpupool.kernels.TensorOps.GemmChoice> measured = java.util.List.of(
                new io.gpupool.kernels.TensorOps.GemmChoice("16x768->768 BF16 BIAS",
                        "gpupool kernels (linear_bf16_warp)", 0.004, Double.NaN, 1),
                new io.gpupool.kernels.TensorOps.GemmChoice("128x768->3072 BF16 BIAS_GELU",
                        "cuBLASLt 13.1.0 algo 66", 0.012, 0.015, 9));
        assertThat(OperationsWiring.gemmChoices(measured)).containsExactly(
                new ManagedPool.GemmChoice("128x768->3072 BF16 BIAS_GELU", "cuBLASLt 13.1.0 algo 66", 0.012, 0.015, 9),
                new ManagedPool.GemmChoice("16x768->768 BF16 BIAS", "gpupool kernels (linear_bf16_warp)", 0.004, null, 1));
        assertThat(OperationsWiring.gemmChoices(new io.gpupool.kernels.host.HostTensorOps().gemmChoices())).isEmpty();
    }
}
