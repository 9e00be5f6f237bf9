package io.gpupool.load;

import org.junit.jupiter.api.Test;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.json.JsonMapper;

import java.time.Duration;
import java.util.SplittableRandom;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class LoadDriverTest {

    private final JsonMapper json = JsonMapper.builder().build();

    @Test
    void payloadsFollowTheModelMetadataWithBatchAndSequenceInRange() {
        JsonNode metadata = json.readTree("""
                {"name":"tiny-bert","inputs":[
                  {"name":"input_ids","datatype":"INT64","shape":[-1,-1]},
                  {"name":"attention_mask","datatype":"INT64","shape":[-1,-1]},
                  {"name":"token_type_ids","datatype":"INT64","shape":[-1,-1]}]}""");
        LoadDriver driver = new LoadDriver(LoadDriver.parse(new String[]{"--batch-max", "4", "--seq-min", "8",
                "--seq-max", "16", "--vocab", "50"}));
        SplittableRandom random = new SplittableRandom(1);
        for (int i = 0; i < 50; i++) {
            long[] tokens = new long[1];
            JsonNode body = json.readTree(driver.payload(metadata, random, tokens));
            JsonNode ids = body.get("inputs").get(0);
            long batch = ids.get("shape").get(0).asLong();
            long seq = ids.get("shape").get(1).asLong();
            assertThat(batch).isBetween(1L, 4L);
            assertThat(seq).isBetween(8L, 16L);
            assertThat(tokens[0]).isEqualTo(batch * seq);
            assertThat(ids.get("data").size()).isEqualTo((int) (batch * seq));
            for (JsonNode id : ids.get("data")) {
                assertThat(id.asInt()).isBetween(1, 49);
            }
            JsonNode mask = body.get("inputs").get(1);
            assertThat(mask.get("shape")).isEqualTo(ids.get("shape"));
            mask.get("data").forEach(v -> assertThat(v.asInt()).isEqualTo(1));
            body.get("inputs").get(2).get("data").forEach(v -> assertThat(v.asInt()).isZero());
        }
    }

    @Test
    void fixedDimensionsAreKeptAndFloatInputsGetNumbers() {
        JsonNode metadata = json.readTree("""
                {"inputs":[{"name":"features","datatype":"FP32","shape":[-1,4]}]}""");
        LoadDriver driver = new LoadDriver(LoadDriver.parse(new String[]{"--batch-max", "3"}));
        JsonNode body = json.readTree(driver.payload(metadata, new SplittableRandom(2), new long[1]));
        JsonNode features = body.get("inputs").get(0);
        assertThat(features.get("shape").get(1).asLong()).isEqualTo(4);
        assertThat(features.get("data").size()).isEqualTo(4 * features.get("shape").get(0).asInt());
        assertThat(features.get("data").get(0).isNumber()).isTrue();
    }

    @Test
    void percentilesUseNearestRank() {
        long[] sorted = new long[100];
        for (int i = 0; i < 100; i++) {
            sorted[i] = (i + 1) * 1_000_000L;
        }
        assertThat(LoadDriver.percentile(sorted, 0.5)).isEqualTo(50.0);
        assertThat(LoadDriver.percentile(sorted, 0.99)).isEqualTo(99.0);
        assertThat(LoadDriver.percentile(sorted, 0.999)).isEqualTo(100.0);
        assertThat(LoadDriver.percentile(new long[0], 0.5)).isZero();
    }

    @Test
    void badOptionsAreRejectedByName() {
        assertThatThrownBy(() -> LoadDriver.parse(new String[]{"--concurrency", "0"})).hasMessageContaining("--concurrency");
        assertThatThrownBy(() -> LoadDriver.parse(new String[]{"--seq-min", "10", "--seq-max", "5"}))
                .hasMessageContaining("--seq-max");
        assertThatThrownBy(() -> LoadDriver.parse(new String[]{"--duration", "soon"})).hasMessageContaining("30s");
        assertThatThrownBy(() -> LoadDriver.parse(new String[]{"--bogus", "1"})).hasMessageContaining("--bogus");
        assertThat(LoadDriver.duration("--duration", "1.5m")).isEqualTo(Duration.ofSeconds(90));
        assertThat(LoadDriver.duration("--duration", "250ms")).isEqualTo(Duration.ofMillis(250));
    }
}
