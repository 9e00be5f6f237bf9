package io.gpupool.model;

import io.gpupool.kernels.TensorOps.Activation;
import io.gpupool.kernels.TensorOps.Pooling;
import tools.jackson.core.JacksonException;
import tools.jackson.core.StreamReadFeature;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.json.JsonMapper;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/**
 * A model folder's {@code config.json}: the architecture (HuggingFace BERT fields, or our MLP
 * section) and our serving section {@code "gpupool"}. Parsed and validated once; every rejection
 * names the file, the field, the value and what was expected.
 *
 * <pre>
 * BERT (as transformers' save_pretrained writes it, plus "gpupool"):
 *   { "model_type": "bert", "hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12,
 *     "intermediate_size": 3072, "max_position_embeddings": 512, "vocab_size": 30522,
 *     "type_vocab_size": 2, "layer_norm_eps": 1e-12, "hidden_act": "gelu",
 *     "gpupool": { "version": "1", "max_batch_size": 8, "max_sequence_length": 128, "pooling": "cls",
 *                  "inputs": ["input_ids", "attention_mask", "token_type_ids"],
 *                  "outputs": ["last_hidden_state", "pooler_output"],
 *                  "dynamic_batching": { "max_queue_delay_microseconds": 100, "max_batch_requests": 32,
 *                                        "max_batch_tokens": 8192, "preferred_batch_size": [8, 16] } } }
 * MLP (ours):
 *   { "model_type": "mlp",
 *     "mlp": { "input_features": 4, "layers": [{"units": 16, "activation": "relu"},
 *                                               {"units": 3, "activation": "none"}],
 *              "output_softmax": true, "class_labels": ["setosa", "versicolor", "virginica"] },
 *     "gpupool": { "max_batch_size": 256 } }
 * </pre>
 * Every field of "gpupool" is optional: inputs and outputs default to all the model offers,
 * max_sequence_length to max_position_embeddings, pooling to "cls", version to "1", dynamic_batching to
 * the server's {@code gpupool.batching.*} (see {@link Batching}).
 */
public record ModelConfig(String name, Architecture architecture, Serving serving) {

    /** What the weights implement. */
    public sealed interface Architecture permits Bert, Mlp {
    }

    /** A BERT encoder with HuggingFace's hyper-parameters. */
    public record Bert(int hiddenSize, int numHiddenLayers, int numAttentionHeads, int intermediateSize,
                       int maxPositionEmbeddings, int vocabSize, int typeVocabSize, float layerNormEps,
                       Activation hiddenAct, int numLabels) implements Architecture {

        public int headDim() {
            return hiddenSize / numAttentionHeads;
        }
    }

    /** One dense layer of an MLP: {@code units} outputs followed by {@code activation}. */
    public record MlpLayer(int units, Activation activation) {
    }

    /** A multi-layer perceptron over {@code inputFeatures} numbers. */
    public record Mlp(int inputFeatures, List<MlpLayer> layers, boolean outputSoftmax, List<String> classLabels)
            implements Architecture {

        public Mlp {
            layers = List.copyOf(layers);
            classLabels = List.copyOf(classLabels);
        }

        public int outputs() {
            return layers.getLast().units();
        }
    }

    /**
     * Our serving section. {@code inputs}/{@code outputs} empty means "all the model offers";
     * {@code maxSequenceLength} is 0 for models without a sequence dimension.
     */
    public record Serving(String version, int maxBatchSize, int maxSequenceLength, Pooling pooling,
                          List<String> inputs, List<String> outputs, Batching batching) {

        public Serving {
            inputs = List.copyOf(inputs);
            outputs = List.copyOf(outputs);
            batching = batching == null ? Batching.UNSET : batching;
        }

        /** A serving section without a {@code dynamic_batching} field. */
        public Serving(String version, int maxBatchSize, int maxSequenceLength, Pooling pooling, List<String> inputs,
                       List<String> outputs) {
            this(version, maxBatchSize, maxSequenceLength, pooling, inputs, outputs, Batching.UNSET);
        }
    }

    /**
     * The serving section's {@code dynamic_batching} field: {@code false}, or an object whose fields override
     * the server's defaults ({@code gpupool.batching.*}); a null component means "the server's default".
     * Its presence as an object turns batching on unless it says {@code "enabled": false}.
     *
     * @param maxQueueDelayMicros {@code max_queue_delay_microseconds}: how long the oldest waiting request may be
     *                            held for others to join its batch (Triton's meaning)
     * @param maxRequests         {@code max_batch_requests}: most requests in one forward
     * @param maxTokens           {@code max_batch_tokens}: most tokens (batch × sequence summed) in one forward
     * @param preferredBatchSizes {@code preferred_batch_size}: batch sizes (summed batch rows) formed at once
     *                            without waiting out the delay; empty: none
     */
    public record Batching(Boolean enabled, Long maxQueueDelayMicros, Integer maxRequests, Integer maxTokens,
                           List<Integer> preferredBatchSizes) {

        /** No {@code dynamic_batching} field: every value is the server's. */
        public static final Batching UNSET = new Batching(null, null, null, null, List.of());

        public Batching {
            preferredBatchSizes = List.copyOf(preferredBatchSizes);
        }
    }

    /** A key given twice is refused: which of the two a loader uses would otherwise be a guess. */
    private static final JsonMapper JSON = JsonMapper.builder()
            .enable(StreamReadFeature.STRICT_DUPLICATE_DETECTION).build();
    private static final int DEFAULT_MAX_BATCH = 32;

    /** Reads and validates {@code configJson} for the model called {@code name}. */
    public static ModelConfig read(String name, Path configJson) {
        String text;
        try {
            text = Files.readString(configJson);
        } catch (IOException e) {
            throw new ModelFormatException(configJson + ": cannot read: " + e.getMessage(), e);
        }
        return parse(name, configJson.toString(), text);
    }

    /** Parses {@code json}; {@code source} names it in error messages. */
    public static ModelConfig parse(String name, String source, String json) {
        JsonNode root;
        try {
            root = JSON.readTree(json);
        } catch (JacksonException e) {
            throw new ModelFormatException(source + ": not valid JSON: " + e.getOriginalMessage());
        }
        if (root == null || !root.isObject()) {
            throw new ModelFormatException(source + ": expected a JSON object");
        }
        Fields f = new Fields(source, root);
        String modelType = f.string("model_type", null);
        Architecture architecture = switch (modelType == null ? "" : modelType) {
            case "bert" -> parseBert(f);
            case "mlp" -> parseMlp(new Fields(source, f.object("mlp")).prefixed("mlp."));
            default -> throw new ModelFormatException(source + ": model_type = " + (modelType == null ? "missing" : "'" + modelType + "'")
                    + ", expected 'bert' or 'mlp'");
        };
        JsonNode servingNode = root.get("gpupool");
        if (servingNode != null && !servingNode.isObject()) {
            throw new ModelFormatException(source + ": gpupool must be an object");
        }
        Fields s = new Fields(source, servingNode == null ? JSON.createObjectNode() : servingNode).prefixed("gpupool.");
        int maxPositions = architecture instanceof Bert bert ? bert.maxPositionEmbeddings() : 0;
        int maxSequence = 0;
        if (architecture instanceof Bert) {
            maxSequence = s.intInRange("max_sequence_length", maxPositions, 1, maxPositions);
        }
        String pooling = s.string("pooling", "cls").toUpperCase(Locale.ROOT);
        Pooling poolingMode = switch (pooling) {
            case "CLS" -> Pooling.CLS;
            case "MEAN" -> Pooling.MEAN;
            default -> throw new ModelFormatException(source + ": gpupool.pooling = '" + pooling.toLowerCase(Locale.ROOT)
                    + "', expected 'cls' or 'mean'");
        };
        Serving serving = new Serving(s.string("version", "1"),
                s.intInRange("max_batch_size", DEFAULT_MAX_BATCH, 1, 1 << 16), maxSequence, poolingMode,
                s.strings("inputs"), s.strings("outputs"), parseBatching(source, servingNode));
        return new ModelConfig(name, architecture, serving);
    }

    private static Batching parseBatching(String source, JsonNode servingNode) {
        JsonNode node = servingNode == null ? null : servingNode.get("dynamic_batching");
        if (node == null || node.isNull()) {
            return Batching.UNSET;
        }
        if (node.isBoolean()) {
            return new Batching(node.asBoolean(), null, null, null, List.of());
        }
        if (!node.isObject()) {
            throw new ModelFormatException(source + ": gpupool.dynamic_batching = " + node
                    + ", expected true, false or an object");
        }
        Fields f = new Fields(source, node).prefixed("gpupool.dynamic_batching.");
        JsonNode enabled = node.get("enabled");
        if (enabled != null && !enabled.isBoolean()) {
            throw new ModelFormatException(source + ": gpupool.dynamic_batching.enabled = " + enabled
                    + ", expected true or false");
        }
        Long delay = node.has("max_queue_delay_microseconds")
                ? (long) f.intInRange("max_queue_delay_microseconds", null, 0, 10_000_000) : null;
        Integer requests = node.has("max_batch_requests") ? f.intInRange("max_batch_requests", null, 1, 4096) : null;
        Integer tokens = node.has("max_batch_tokens") ? f.intInRange("max_batch_tokens", null, 1, 1 << 24) : null;
        List<Integer> preferred = new ArrayList<>();
        JsonNode sizes = node.get("preferred_batch_size");
        if (sizes != null && !sizes.isNull()) {
            if (!sizes.isArray()) {
                throw new ModelFormatException(source + ": gpupool.dynamic_batching.preferred_batch_size = " + sizes
                        + ", expected an array of positive integers");
            }
            for (JsonNode size : sizes) {
                if (!size.isIntegralNumber() || size.isBigInteger() || size.longValue() < 1 || size.longValue() > 1 << 16) {
                    throw new ModelFormatException(source + ": gpupool.dynamic_batching.preferred_batch_size = " + sizes
                            + ", expected an array of integers in [1, 65536]");
                }
                preferred.add(size.intValue());
            }
        }
        return new Batching(enabled == null || enabled.asBoolean(), delay, requests, tokens, preferred);
    }

    private static Bert parseBert(Fields f) {
        int hidden = f.intInRange("hidden_size", null, 1, 1 << 16);
        int heads = f.intInRange("num_attention_heads", null, 1, hidden);
        if (hidden % heads != 0) {
            throw new ModelFormatException(f.source + ": hidden_size = " + hidden + " is not a multiple of num_attention_heads = " + heads);
        }
        Activation act = switch (f.string("hidden_act", "gelu")) {
            case "gelu" -> Activation.GELU;
            case "relu" -> Activation.RELU;
            case "tanh" -> Activation.TANH;
            case String other -> throw new ModelFormatException(f.source + ": hidden_act = '" + other
                    + "', expected 'gelu' (erf form), 'relu' or 'tanh'");
        };
        float eps = (float) f.number("layer_norm_eps", 1e-12);
        if (!(eps > 0) || eps > 1) {
            throw new ModelFormatException(f.source + ": layer_norm_eps = " + eps + ", expected a number in (0, 1]");
        }
        int numLabels = 0;
        JsonNode id2label = f.node.get("id2label");
        if (f.node.has("num_labels")) {
            numLabels = f.intInRange("num_labels", null, 1, 1 << 20);
        } else if (id2label != null && id2label.isObject()) {
            numLabels = id2label.size();
        }
        return new Bert(hidden,
                f.intInRange("num_hidden_layers", null, 1, 1024),
                heads,
                f.intInRange("intermediate_size", null, 1, 1 << 20),
                f.intInRange("max_position_embeddings", null, 1, 1 << 20),
                f.intInRange("vocab_size", null, 1, 1 << 24),
                f.intInRange("type_vocab_size", 2, 1, 1 << 16),
                eps, act, numLabels);
    }

    private static Mlp parseMlp(Fields f) {
        int features = f.intInRange("input_features", null, 1, 1 << 20);
        JsonNode layersNode = f.node.get("layers");
        if (layersNode == null || !layersNode.isArray() || layersNode.isEmpty()) {
            throw new ModelFormatException(f.source + ": mlp.layers must be a non-empty array of {units, activation}");
        }
        List<MlpLayer> layers = new ArrayList<>();
        for (int i = 0; i < layersNode.size(); i++) {
            JsonNode layerNode = layersNode.get(i);
            if (!layerNode.isObject()) {
                throw new ModelFormatException(f.source + ": mlp.layers[" + i + "] is not an object");
            }
            Fields lf = new Fields(f.source, layerNode).prefixed("mlp.layers[" + i + "].");
            int units = lf.intInRange("units", null, 1, 1 << 20);
            String activation = lf.string("activation", "none");
            Activation act = switch (activation) {
                case "none", "identity", "linear" -> Activation.NONE;
                case "relu" -> Activation.RELU;
                case "tanh" -> Activation.TANH;
                case "gelu" -> Activation.GELU;
                default -> throw new ModelFormatException(f.source + ": mlp.layers[" + i + "].activation = '" + activation
                        + "', expected 'none', 'relu', 'tanh' or 'gelu'");
            };
            layers.add(new MlpLayer(units, act));
        }
        boolean softmax = f.node.path("output_softmax").asBoolean(false);
        List<String> labels = f.strings("class_labels");
        int outputs = layers.getLast().units();
        if (!labels.isEmpty() && labels.size() != outputs) {
            throw new ModelFormatException(f.source + ": mlp.class_labels has " + labels.size()
                    + " names but the last layer has " + outputs + " units");
        }
        return new Mlp(features, layers, softmax, labels);
    }

    /** Typed, validated access to one JSON object's fields. */
    private static final class Fields {
        final String source;
        final JsonNode node;
        String prefix = "";

        Fields(String source, JsonNode node) {
            this.source = source;
            this.node = node;
        }

        Fields prefixed(String prefix) {
            this.prefix = prefix;
            return this;
        }

        JsonNode object(String field) {
            JsonNode value = node.get(field);
            if (value == null || !value.isObject()) {
                throw new ModelFormatException(source + ": " + prefix + field + " is missing or not an object");
            }
            return value;
        }

        String string(String field, String fallback) {
            JsonNode value = node.get(field);
            if (value == null || value.isNull()) {
                return fallback;
            }
            if (!value.isString()) {
                throw new ModelFormatException(source + ": " + prefix + field + " = " + value + ", expected a string");
            }
            return value.asString();
        }

        double number(String field, double fallback) {
            JsonNode value = node.get(field);
            if (value == null || value.isNull()) {
                return fallback;
            }
            if (!value.isNumber() || value.isBigInteger() || value.isBigDecimal()) {
                throw new ModelFormatException(source + ": " + prefix + field + " = " + value
                        + ", expected a number within a double's range");
            }
            return value.doubleValue();
        }

        int intInRange(String field, Integer fallback, int min, int max) {
            JsonNode value = node.get(field);
            if (value == null || value.isNull()) {
                if (fallback == null) {
                    throw new ModelFormatException(source + ": " + prefix + field + " is missing, expected an integer in ["
                            + min + ", " + max + "]");
                }
                return fallback;
            }
            if (!value.isIntegralNumber() || value.isBigInteger() || value.longValue() < min || value.longValue() > max) {
                throw new ModelFormatException(source + ": " + prefix + field + " = " + value + ", expected an integer in ["
                        + min + ", " + max + "]");
            }
            return value.intValue();
        }

        List<String> strings(String field) {
            JsonNode value = node.get(field);
            if (value == null || value.isNull()) {
                return List.of();
            }
            if (!value.isArray()) {
                throw new ModelFormatException(source + ": " + prefix + field + " = " + value + ", expected an array of strings");
            }
            List<String> out = new ArrayList<>();
            for (JsonNode item : value) {
                if (!item.isString()) {
                    throw new ModelFormatException(source + ": " + prefix + field + " = " + value + ", expected an array of strings");
                }
                out.add(item.asString());
            }
            return out;
        }
    }
}
