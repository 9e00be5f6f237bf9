package io.gpupool.model;

import io.gpupool.kernels.TensorOps.Activation;
import io.gpupool.kernels.TensorOps.Pooling;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class ModelConfigTest {

    private static final String BERT = """
            {"model_type": "bert", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
             "intermediate_size": 128, "max_position_embeddings": 128, "vocab_size": 1000,
             "type_vocab_size": 2, "layer_norm_eps": 1e-12, "hidden_act": "gelu" %s}""";

    @Test
    void bertFieldsAndServingDefaults() {
        ModelConfig config = ModelConfig.parse("m", "config.json", BERT.formatted(""));

        assertThat(config.architecture()).isEqualTo(new ModelConfig.Bert(64, 2, 4, 128, 128, 1000, 2, 1e-12f,
                Activation.GELU, 0));
        assertThat(config.serving()).isEqualTo(new ModelConfig.Serving("1", 32, 128, Pooling.CLS,
                java.util.List.of(), java.util.List.of()));
    }

    @Test
    void aKeyGivenTwiceIsNamedNotGuessed() {
        assertThatThrownBy(() -> ModelConfig.parse("m", "models/m/config.json",
                BERT.formatted(", \"hidden_size\": 128")))
                .isInstanceOf(ModelFormatException.class)
                .hasMessageStartingWith("models/m/config.json: not valid JSON: ")
                .hasMessageContaining("Duplicate Object property \"hidden_size\"");
    }

    @Test
    void servingSectionOverridesDefaults() {
        ModelConfig config = ModelConfig.parse("m", "config.json", BERT.formatted(
                ", \"gpupool\": {\"version\": \"7\", \"max_batch_size\": 4, \"max_sequence_length\": 16, \"pooling\": \"mean\"}"));

        assertThat(config.serving().version()).isEqualTo("7");
        assertThat(config.serving().maxBatchSize()).isEqualTo(4);
        assertThat(config.serving().maxSequenceLength()).isEqualTo(16);
        assertThat(config.serving().pooling()).isEqualTo(Pooling.MEAN);
    }

    @ParameterizedTest
    @CsvSource(delimiter = '|', value = {
            "\"hidden_size\": 64|\"hidden_size\": 0|hidden_size = 0, expected an integer in [1, 65536]",
            "\"hidden_size\": 64|\"hidden_size\": 66|hidden_size = 66 is not a multiple of num_attention_heads = 4",
            "\"hidden_act\": \"gelu\"|\"hidden_act\": \"gelu_new\"|hidden_act = 'gelu_new', expected 'gelu' (erf form), 'relu' or 'tanh'",
            "\"vocab_size\": 1000,|\"vocab_size\": \"many\",|vocab_size = \"many\", expected an integer",
            "\"num_hidden_layers\": 2,||num_hidden_layers is missing",
            "\"model_type\": \"bert\"|\"model_type\": \"gpt2\"|model_type = 'gpt2', expected 'bert' or 'mlp'",
            "\"layer_norm_eps\": 1e-12|\"layer_norm_eps\": -1|layer_norm_eps = -1.0, expected a number in (0, 1]",
            "\"hidden_size\": 64|\"hidden_size\": 18446744073709551616|hidden_size = 18446744073709551616, expected an integer in [1, 65536]",
            "\"layer_norm_eps\": 1e-12|\"layer_norm_eps\": 18446744073709551616|layer_norm_eps = 18446744073709551616, expected a number within a double's range",
    })
    void badFieldsAreNamedWithValueAndExpectation(String from, String to, String message) {
        String json = BERT.formatted("").replace(from, to == null ? "" : to);
        assertThatThrownBy(() -> ModelConfig.parse("m", "models/m/config.json", json))
                .isInstanceOf(ModelFormatException.class)
                .hasMessageStartingWith("models/m/config.json: ")
                .hasMessageContaining(message);
    }

    @Test
    void servingLimitsAreChecked() {
        assertThatThrownBy(() -> ModelConfig.parse("m", "c", BERT.formatted(", \"gpupool\": {\"max_sequence_length\": 129}")))
                .hasMessageContaining("gpupool.max_sequence_length = 129, expected an integer in [1, 128]");
        assertThatThrownBy(() -> ModelConfig.parse("m", "c", BERT.formatted(", \"gpupool\": {\"pooling\": \"max\"}")))
                .hasMessageContaining("gpupool.pooling = 'max', expected 'cls' or 'mean'");
    }

    @Test
    void mlpSection() {
        ModelConfig config = ModelConfig.parse("iris", "c", """
                {"model_type": "mlp", "mlp": {"input_features": 4, "output_softmax": true,
                 "layers": [{"units": 8, "activation": "relu"}, {"units": 3}], "class_labels": ["a", "b", "c"]}}""");

        assertThat(config.architecture()).isEqualTo(new ModelConfig.Mlp(4,
                java.util.List.of(new ModelConfig.MlpLayer(8, Activation.RELU), new ModelConfig.MlpLayer(3, Activation.NONE)),
                true, java.util.List.of("a", "b", "c")));
        assertThat(config.serving().maxSequenceLength()).isZero();
        assertThatThrownBy(() -> ModelConfig.parse("iris", "c", """
                {"model_type": "mlp", "mlp": {"input_features": 4, "layers": [{"units": 3}], "class_labels": ["a"]}}"""))
                .hasMessageContaining("mlp.class_labels has 1 names but the last layer has 3 units");
        assertThatThrownBy(() -> ModelConfig.parse("iris", "c", """
                {"model_type": "mlp", "mlp": {"input_features": 4, "layers": [{"units": 3, "activation": "swish"}]}}"""))
                .hasMessageContaining("mlp.layers[0].activation = 'swish'");
    }
}
