package io.gpupool.lab;

import io.gpupool.kernels.cuda.Precision;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.json.JsonMapper;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

import static io.gpupool.model.testing.Fixtures.fixture;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * The BERT benchmark's smoke mode: the host backend and the tiny fixture model, so that the JSON the GPU run feeds
 * to tools/bert-vs-torch.sh has the fields the table script reads, and the accuracy check really compares.
 */
class BertGpuBenchSmokeTest {

    @Test
    void hostSmokeRunWritesTimingsAccuracyAndSkipsShapesAboveTheModelsMaximum(@TempDir Path dir) throws Exception {
        Path out = dir.resolve("bench.json");
        BertGpuBench.Options options = BertGpuBench.parse(new String[]{
                "--backend", "host", "--model", fixture("tiny-bert").toString(), "--out", out.toString(),
                "--batches", "1,2", "--seqs", "8,128", "--warmup", "1", "--reps", "3", "--budget-s", "60",
                "--profile", "2x8,32x512"});

        int status = BertGpuBench.run(options);

        JsonNode doc = JsonMapper.builder().build().readTree(Files.readString(out));
        assertThat(status).isZero();
        assertThat(doc.get("status").asString()).isEqualTo("complete");
        // tiny-bert serves at most 64 tokens: the 128-token shapes are skipped, the others timed in both modes.
        assertThat(doc.get("results")).hasSize(4);
        assertThat(doc.get("skipped")).hasSize(2);
        for (JsonNode row : doc.get("results")) {
            assertThat(row.get("precision").asString()).isEqualTo("FP32-host");
            assertThat(row.get("seq").asInt()).isEqualTo(8);
            assertThat(row.get("ms").asDouble()).isPositive();
            assertThat(row.get("reps").asInt()).isEqualTo(3);
        }
        assertThat(doc.get("results").get(0).get("output").asString()).isEqualTo("pooler_output");
        assertThat(doc.get("results").get(1).get("output").asString()).isEqualTo("last_hidden_state");
        // Profile: 2 layers -> embeddings with their LayerNorm (one op), 5 ops per layer (qkv, attention, output
        // projection + add+LayerNorm, FFN up, FFN down + add+LayerNorm), pooler dense, one CLS pool (the embedding
        // reuses it: the fixture serves CLS); 32x512 is above the model's maximum and left out. Kernel launches are
        // counted on CUDA only.
        assertThat(doc.get("profile")).hasSize(1);
        JsonNode profile = doc.get("profile").get(0);
        assertThat(profile.get("ops").asInt()).isEqualTo(1 + 5 * 2 + 2);
        assertThat(profile.has("launches")).isFalse();
        assertThat(profile.get("device_ms").get("attention").get("calls").asInt()).isEqualTo(2);
        assertThat(profile.get("device_ms").get("linear 32->96").get("calls").asInt()).isEqualTo(2);
        // The fixture's reference was computed by transformers: FP32 on the host matches it.
        JsonNode accuracy = doc.get("accuracy").get(0);
        assertThat(accuracy.get("max_abs_diff").asDouble()).isLessThan(1e-4);
        assertThat(accuracy.get("max_abs_reference").asDouble()).isPositive();
    }

    @Test
    void unknownPrecisionIsReportedAndTheKnownOnesKept() {
        BertGpuBench.Options options = BertGpuBench.parse(new String[]{
                "--model", "m", "--out", "o", "--precisions", "fp32, FP8,tf32x3"});
        List<String> errors = new ArrayList<>();

        List<Precision> precisions = BertGpuBench.precisions(options.precisions(), errors);

        assertThat(precisions).containsExactly(Precision.FP32, Precision.TF32X3);
        assertThat(errors).singleElement().asString().startsWith("FP8: not a precision of these kernels");
    }

    @Test
    void badOptionsNameTheOption() {
        org.assertj.core.api.Assertions.assertThatThrownBy(() -> BertGpuBench.parse(new String[]{"--model", "m"}))
                .hasMessageContaining("--out is required");
        org.assertj.core.api.Assertions.assertThatThrownBy(() -> BertGpuBench.parse(
                        new String[]{"--model", "m", "--out", "o", "--backend", "rocm"}))
                .hasMessageContaining("--backend must be cuda or host");
    }

    @Test
    void variantsBesideEagerAreMarkedAndSkippedWhereTheBackendHasNoLibraryOrGraphs(@TempDir Path dir) throws Exception {
        Path out = dir.resolve("bench.json");
        BertGpuBench.Options options = BertGpuBench.parse(new String[]{
                "--backend", "host", "--model", fixture("tiny-bert").toString(), "--out", out.toString(),
                "--batches", "1", "--seqs", "8", "--warmup", "1", "--reps", "3", "--profile", "none",
                "--variants", "graphs,tuned,graphs"});
        assertThat(options.variants()).containsExactly("eager", "graphs", "tuned");

        assertThat(BertGpuBench.run(options)).isZero();

        JsonNode doc = JsonMapper.builder().build().readTree(Files.readString(out));
        assertThat(doc.get("results")).hasSize(2);
        for (JsonNode row : doc.get("results")) {
            assertThat(row.get("variant").asString()).isEqualTo("eager");
        }
        assertThat(doc.get("skipped")).hasSize(2);
        assertThat(doc.get("skipped").get(0).asString()).contains("graphs").contains("not available");
        assertThat(doc.get("gemm_choices")).isEmpty();
        assertThat(doc.get("kernel_options").get("gemm_tuning").asBoolean()).isFalse();
        org.assertj.core.api.Assertions.assertThatThrownBy(() -> BertGpuBench.variants("eager,compiled"))
                .hasMessageContaining("--variants: unknown 'compiled'");
        assertThat(BertGpuBench.kernelOptions("warp-layer-norm,gemm-tuning").tuneGemms()).isTrue();
    }
}
