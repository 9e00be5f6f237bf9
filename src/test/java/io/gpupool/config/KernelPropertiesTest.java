package io.gpupool.config;

import io.gpupool.kernels.cuda.KernelOptions;

import io.gpupool.kernels.cuda.AttentionKernels;
import io.gpupool.kernels.cuda.GemmEngine;
import io.gpupool.kernels.cuda.Precision;
import org.junit.jupiter.api.Test;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.jackson.autoconfigure.JacksonAutoConfiguration;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * {@code gpupool.kernels.*}: bound with the application's configuration; FP32 and the AUTO GEMM engine (cuBLASLt where
 * it loads) unless asked otherwise.
 */
class KernelPropertiesTest {

    private final ApplicationContextRunner runner = new ApplicationContextRunner()
            .withConfiguration(AutoConfigurations.of(JacksonAutoConfiguration.class))
            .withUserConfiguration(GpuPoolConfiguration.class)
            .withPropertyValues("gpupool.backend=host", "gpupool.serving.warm-up=false",
                    "gpupool.models.path=does-not-exist");

    @Test
    void exactFp32ByDefault() {
        runner.run(context -> {
            assertThat(context).hasNotFailed();
            assertThat(context.getBean(KernelProperties.class).getPrecision()).isEqualTo(Precision.FP32);
        });
    }

    @Test
    void tensorCorePrecisionIsBoundCaseInsensitively() {
        runner.withPropertyValues("gpupool.kernels.precision=bf16").run(context -> {
            assertThat(context).hasNotFailed();
            assertThat(context.getBean(KernelProperties.class).getPrecision()).isEqualTo(Precision.BF16);
        });
        runner.withPropertyValues("gpupool.kernels.precision=TF32").run(context ->
                assertThat(context.getBean(KernelProperties.class).getPrecision()).isEqualTo(Precision.TF32));
        runner.withPropertyValues("gpupool.kernels.precision=tf32x3").run(context ->
                assertThat(context.getBean(KernelProperties.class).getPrecision()).isEqualTo(Precision.TF32X3));
    }

    @Test
    void unknownPrecisionFailsStartupNamingTheProperty() {
        runner.withPropertyValues("gpupool.kernels.precision=FP16").run(context ->
                assertThat(context).getFailure().hasStackTraceContaining("gpupool.kernels.precision")
                        .hasStackTraceContaining("FP16"));
    }

    @Test
    void gemmEngineAndLibraryFolderAreBound() {
        runner.run(context -> assertThat(context.getBean(KernelProperties.class).getGemmEngine())
                .isEqualTo(GemmEngine.AUTO));
        runner.withPropertyValues("gpupool.kernels.gemm-engine=own",
                "gpupool.kernels.cublas-lt-dir=/usr/local/cuda-13.0/targets/x86_64-linux/lib").run(context -> {
            assertThat(context).hasNotFailed();
            KernelProperties kernels = context.getBean(KernelProperties.class);
            assertThat(kernels.getGemmEngine()).isEqualTo(GemmEngine.OWN);
            assertThat(kernels.getCublasLtDir()).hasToString("/usr/local/cuda-13.0/targets/x86_64-linux/lib");
        });
        runner.withPropertyValues("gpupool.kernels.gemm-engine=cublas").run(context ->
                assertThat(context).getFailure().hasStackTraceContaining("gpupool.kernels.gemm-engine"));
    }

    @Test
    void attentionKernelsAreBoundCaseInsensitivelyAndAnUnknownOneFailsStartup() {
        runner.run(context -> assertThat(context.getBean(KernelProperties.class).getAttention())
                .isEqualTo(AttentionKernels.TILED));
        runner.withPropertyValues("gpupool.kernels.attention=classic").run(context -> {
            assertThat(context).hasNotFailed();
            assertThat(context.getBean(KernelProperties.class).getAttention()).isEqualTo(AttentionKernels.CLASSIC);
        });
        runner.withPropertyValues("gpupool.kernels.attention=flash").run(context ->
                assertThat(context).getFailure().hasStackTraceContaining("gpupool.kernels.attention")
                        .hasStackTraceContaining("flash"));
    }

    @Test
    void warpLayerNormIsOnAndTheResidualInTheGemmOffUnlessAskedFor() {
        runner.run(context -> assertThat(context.getBean(KernelProperties.class).kernelOptions())
                .isEqualTo(new io.gpupool.kernels.cuda.KernelOptions(false, false, true))
                .isEqualTo(io.gpupool.kernels.cuda.KernelOptions.DEFAULT));
        runner.withPropertyValues("gpupool.kernels.warp-layer-norm=false")
                .run(context -> assertThat(context.getBean(KernelProperties.class).kernelOptions())
                        .isEqualTo(io.gpupool.kernels.cuda.KernelOptions.NONE));
        runner.withPropertyValues("gpupool.kernels.residual-in-gemm=true", "gpupool.kernels.warp-layer-norm=true")
                .run(context -> assertThat(context.getBean(KernelProperties.class).kernelOptions())
                        .isEqualTo(new io.gpupool.kernels.cuda.KernelOptions(false, true, true)));
        runner.withPropertyValues("gpupool.kernels.gemm-tuning=true")
                .run(context -> assertThat(context.getBean(KernelProperties.class).kernelOptions())
                        .isEqualTo(new io.gpupool.kernels.cuda.KernelOptions(false, false, true, true)));
    }

    @Test
    void withGemmTuningTheWarmUpAlsoRunsTheGraphBucketsShapes() {
        KernelProperties kernels = new KernelProperties();
        GraphProperties graphs = new GraphProperties();
        assertThat(GpuPoolConfiguration.warmUpShapes(kernels, graphs)).as("tuning off: the largest size only").isEmpty();
        kernels.setGemmTuning(true);
        graphs.setBatchBuckets(java.util.List.of(1, 4));
        graphs.setSequenceBuckets(java.util.List.of(16, 128));
        assertThat(GpuPoolConfiguration.warmUpShapes(kernels, graphs)).containsExactly(
                new io.gpupool.serving.WarmUp.Shape(1, 16), new io.gpupool.serving.WarmUp.Shape(1, 128),
                new io.gpupool.serving.WarmUp.Shape(4, 16), new io.gpupool.serving.WarmUp.Shape(4, 128));
    }
}
