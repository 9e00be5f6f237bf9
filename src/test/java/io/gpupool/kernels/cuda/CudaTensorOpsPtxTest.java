package io.gpupool.kernels.cuda;

import org.junit.jupiter.api.Test;

import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * Checks, without a GPU, that the committed PTX ships every kernel {@link CudaTensorOps} looks up, for a target
 * the driver of any Ampere-or-newer card accepts; a renamed kernel or a forgotten tools/build-ptx.sh run shows
 * up here instead of at model load on the server.
 */
class CudaTensorOpsPtxTest {

    private static final Map<String, List<String>> KERNELS = Map.of(
            "gemm", List.of("gemm_f32", "gemm_tc_tf32_128", "gemm_tc_tf32_64", "gemm_tc_bf16_128", "gemm_tc_bf16_64",
                    "gemm_tc_tf32x3_128", "gemm_tc_tf32x3_64"),
            "attention", List.of("attention_d32", "attention_d64", "attention_d128", "attention_bf16_d64",
                    "attention_bf16io_d64", "attention_d64_tiled", "flash_attention_bf16io_d64_q64",
                    "flash_attention_bf16io_d64_q128"),
            "ops", List.of("embedding_sum", "add_layer_norm", "pool_cls", "pool_mean", "softmax_rows"));

    @Test
    void everyModuleDeclaresTheKernelsTheOpsLaunch() {
        KERNELS.forEach((module, kernels) -> {
            String ptx = new String(KernelLauncher.ptx(module), StandardCharsets.US_ASCII);
            assertThat(ptx).as(module).contains(".target sm_80");
            for (String kernel : kernels) {
                assertThat(ptx).as(module + " declares " + kernel).contains(".visible .entry " + kernel + "(");
            }
        });
    }

    @Test
    void missingModuleIsReportedByName() {
        assertThatThrownBy(() -> KernelLauncher.ptx("no_such_module"))
                .isInstanceOf(IllegalStateException.class)
                .hasMessageContaining("/ptx/no_such_module.ptx");
    }

    @Test
    void rowKernelsUseWholeWarpsUpToTheBlockLimit() {
        assertThat(KernelLauncher.rowBlock(1)).isEqualTo(32);
        assertThat(KernelLauncher.rowBlock(33)).isEqualTo(64);
        assertThat(KernelLauncher.rowBlock(768)).isEqualTo(256);
    }
}
