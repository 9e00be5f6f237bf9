package io.gpupool.serving;

import io.gpupool.model.ModelConfig;
import io.gpupool.model.ModelFormatException;
import org.junit.jupiter.api.Test;

import java.time.Duration;
import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/** config.json's dynamic_batching field over the server's gpupool.batching.* defaults. */
class BatchPolicyTest {

    static final String BERT = """
            {"model_type": "bert", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
             "intermediate_size": 128, "max_position_embeddings": 128, "vocab_size": 1000, "gpupool": {%s}}""";

    static final BatchPolicy.Defaults SERVER = new BatchPolicy.Defaults(false, Duration.ofNanos(100_000), 32, 8192,
            List.of());

    static ModelConfig.Batching batching(String field) {
        return ModelConfig.parse("m", "models/m/config.json", BERT.formatted(field)).serving().batching();
    }

    @Test
    void withoutTheFieldTheServerDefaultDecides() {
        assertThat(batching("")).isEqualTo(ModelConfig.Batching.UNSET);
        assertThat(SERVER.resolve("m", batching(""))).as("server default off").isNull();
        BatchPolicy on = new BatchPolicy.Defaults(true, Duration.ofNanos(100_000), 32, 8192, List.of(4))
                .resolve("m", batching(""));
        assertThat(on).isEqualTo(new BatchPolicy(Duration.ofNanos(100_000), 32, 8192, new int[]{4}));
    }

    @Test
    void anObjectTurnsBatchingOnAndOverridesWhatItNames() {
        BatchPolicy policy = SERVER.resolve("m", batching("""
                "dynamic_batching": {"max_queue_delay_microseconds": 250, "max_batch_tokens": 2048,
                                     "preferred_batch_size": [16, 8]}"""));

        assertThat(policy.maxQueueDelay()).isEqualTo(Duration.ofNanos(250_000));
        assertThat(policy.maxRequests()).as("the server's").isEqualTo(32);
        assertThat(policy.maxTokens()).isEqualTo(2048);
        assertThat(policy.preferredBatchSizes()).as("sorted").containsExactly(8, 16);
    }

    @Test
    void falseOrEnabledFalseTurnsItOffWhateverTheServerSays() {
        BatchPolicy.Defaults serverOn = new BatchPolicy.Defaults(true, Duration.ZERO, 8, 512, List.of());
        assertThat(serverOn.resolve("m", batching("\"dynamic_batching\": false"))).isNull();
        assertThat(serverOn.resolve("m", batching("\"dynamic_batching\": {\"enabled\": false}"))).isNull();
        assertThat(serverOn.resolve("m", batching("\"dynamic_batching\": true")).maxRequests()).isEqualTo(8);
    }

    @Test
    void badValuesAreNamedWithTheField() {
        assertThatThrownBy(() -> batching("\"dynamic_batching\": {\"max_batch_requests\": 0}"))
                .isInstanceOf(ModelFormatException.class)
                .hasMessageContaining("gpupool.dynamic_batching.max_batch_requests = 0, expected an integer in [1, 4096]");
        assertThatThrownBy(() -> batching("\"dynamic_batching\": {\"preferred_batch_size\": [4, -1]}"))
                .isInstanceOf(ModelFormatException.class)
                .hasMessageContaining("gpupool.dynamic_batching.preferred_batch_size = [4,-1]");
        assertThatThrownBy(() -> batching("\"dynamic_batching\": \"yes\""))
                .isInstanceOf(ModelFormatException.class)
                .hasMessageContaining("gpupool.dynamic_batching = \"yes\", expected true, false or an object");
        assertThatThrownBy(() -> new BatchPolicy.Defaults(true, Duration.ofSeconds(11), 32, 8192, List.of()))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("max queue delay = PT11S");
    }
}
