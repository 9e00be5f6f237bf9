package io.gpupool.model.bert;

import io.gpupool.model.DeviceWeights;
import io.gpupool.model.ModelConfig;
import io.gpupool.model.ModelFormatException;
import io.gpupool.model.safetensors.SafetensorsFile;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;

/**
 * What a BERT checkpoint ({@code save_pretrained}'s safetensors) must hold for its config, and how it goes to the
 * device, for {@link BertModel#load}. The file is checked before anything is allocated, so a wrong checkpoint fails
 * with every missing and every unexpected tensor named, not half uploaded.
 * <pre>
 *   [bert.]embeddings.{word,position,token_type}_embeddings.weight, embeddings.LayerNorm.{weight,bias}
 *   [bert.]encoder.layer.N.attention.self.{query,key,value}.{weight,bias}   uploaded fused: ...attention.self.qkv.*
 *                          attention.output.{dense,LayerNorm}.*, intermediate.dense.*, output.{dense,LayerNorm}.*
 *   [bert.]pooler.dense.*                                                   optional
 *   classifier.{weight,bias}                                                BertForSequenceClassification; needs the
 *                                                                           pooler
 * </pre>
 * The prefix {@code bert.} is there when the file holds {@code bert.embeddings.word_embeddings.weight}. On bf16
 * activations the linear weights and biases are uploaded as bf16; embedding tables and LayerNorm parameters stay
 * FP32.
 *
 * @param prefix    "bert." or ""
 * @param pooler    whether the file holds the pooler
 * @param numLabels the classifier's labels, 0 without one
 * @param expected  every tensor the file must hold, with its shape, in upload order
 */
record BertCheckpoint(String prefix, boolean pooler, int numLabels, Map<String, long[]> expected) {

    /** Buffers transformers may save next to the weights; not parameters, ignored. */
    private static final Set<String> IGNORED_BUFFERS = Set.of("embeddings.position_ids", "embeddings.token_type_ids");

    /**
     * Checks {@code file} against {@code arch} (every expected tensor present with the shape the config implies,
     * nothing unexpected) and says what it holds.
     */
    static BertCheckpoint check(ModelConfig config, ModelConfig.Bert arch, SafetensorsFile file) {
        Map<String, long[]> expected = new LinkedHashMap<>();
        String prefix = file.tensors().containsKey("bert.embeddings.word_embeddings.weight") ? "bert." : "";
        int h = arch.hiddenSize();
        expected.put(prefix + "embeddings.word_embeddings.weight", new long[]{arch.vocabSize(), h});
        expected.put(prefix + "embeddings.position_embeddings.weight", new long[]{arch.maxPositionEmbeddings(), h});
        expected.put(prefix + "embeddings.token_type_embeddings.weight", new long[]{arch.typeVocabSize(), h});
        expected.put(prefix + "embeddings.LayerNorm.weight", new long[]{h});
        expected.put(prefix + "embeddings.LayerNorm.bias", new long[]{h});
        for (int layer = 0; layer < arch.numHiddenLayers(); layer++) {
            String p = prefix + "encoder.layer." + layer + ".";
            for (String qkv : List.of("query", "key", "value")) {
                expected.put(p + "attention.self." + qkv + ".weight", new long[]{h, h});
                expected.put(p + "attention.self." + qkv + ".bias", new long[]{h});
            }
            expected.put(p + "attention.output.dense.weight", new long[]{h, h});
            expected.put(p + "attention.output.dense.bias", new long[]{h});
            expected.put(p + "attention.output.LayerNorm.weight", new long[]{h});
            expected.put(p + "attention.output.LayerNorm.bias", new long[]{h});
            expected.put(p + "intermediate.dense.weight", new long[]{arch.intermediateSize(), h});
            expected.put(p + "intermediate.dense.bias", new long[]{arch.intermediateSize()});
            expected.put(p + "output.dense.weight", new long[]{h, arch.intermediateSize()});
            expected.put(p + "output.dense.bias", new long[]{h});
            expected.put(p + "output.LayerNorm.weight", new long[]{h});
            expected.put(p + "output.LayerNorm.bias", new long[]{h});
        }
        boolean pooler = file.tensors().containsKey(prefix + "pooler.dense.weight")
                || file.tensors().containsKey(prefix + "pooler.dense.bias");
        if (pooler) {
            expected.put(prefix + "pooler.dense.weight", new long[]{h, h});
            expected.put(prefix + "pooler.dense.bias", new long[]{h});
        }
        int numLabels = 0;
        if (file.tensors().containsKey("classifier.weight") || file.tensors().containsKey("classifier.bias")) {
            if (!pooler) {
                throw new ModelFormatException(file.path() + ": has classifier weights but no pooler (pooler.dense)");
            }
            SafetensorsFile.TensorInfo classifier = file.tensors().get("classifier.weight");
            numLabels = arch.numLabels() > 0 ? arch.numLabels()
                    : classifier != null && classifier.shape().length == 2 ? (int) classifier.shape()[0] : 1;
            expected.put("classifier.weight", new long[]{numLabels, h});
            expected.put("classifier.bias", new long[]{numLabels});
        }
        checkTensors(file, expected, prefix, config);
        return new BertCheckpoint(prefix, pooler, numLabels, expected);
    }

    /**
     * Uploads every expected tensor into {@code weights} (bf16 for the linear parameters where {@code bf16}), each
     * layer's query, key and value as one fused {@code qkv} tensor, and finishes the upload. The caller closes
     * {@code weights} when this fails.
     */
    void upload(DeviceWeights weights, SafetensorsFile file, int layers, boolean bf16) {
        for (String name : expected.keySet()) {
            if (name.contains(".attention.self.")) {
                continue;
            }
            if (bf16 && isLinearParameter(name)) {
                weights.uploadBf16(name, file, name);
            } else {
                weights.upload(name, file, name);
            }
        }
        for (int layer = 0; layer < layers; layer++) {
            String p = prefix + "encoder.layer." + layer + ".attention.self.";
            String[] w = {p + "query.weight", p + "key.weight", p + "value.weight"};
            String[] bias = {p + "query.bias", p + "key.bias", p + "value.bias"};
            if (bf16) {
                weights.uploadBf16(p + "qkv.weight", file, w);
                weights.uploadBf16(p + "qkv.bias", file, bias);
            } else {
                weights.upload(p + "qkv.weight", file, w);
                weights.upload(p + "qkv.bias", file, bias);
            }
        }
        weights.finish();
    }

    /**
     * Whether {@code name} is the weight or bias of a linear layer (stored in the activation type), as opposed to
     * an embedding table or a LayerNorm parameter (always FP32).
     */
    static boolean isLinearParameter(String name) {
        return name.contains(".dense.") || name.startsWith("classifier.");
    }

    /** Fails naming every missing tensor, every unexpected one, and the first shape that disagrees. */
    static void checkTensors(SafetensorsFile file, Map<String, long[]> expected, String prefix, ModelConfig config) {
        Set<String> missing = new TreeSet<>(expected.keySet());
        missing.removeAll(file.tensors().keySet());
        if (!missing.isEmpty()) {
            throw new ModelFormatException(file.path() + ": missing " + missing.size() + " tensor(s) the config of model '"
                    + config.name() + "' needs: " + abbreviate(missing));
        }
        Set<String> extra = new TreeSet<>(file.tensors().keySet());
        extra.removeAll(expected.keySet());
        extra.removeIf(name -> name.startsWith(prefix) && IGNORED_BUFFERS.contains(name.substring(prefix.length())));
        if (!extra.isEmpty()) {
            throw new ModelFormatException(file.path() + ": " + extra.size() + " tensor(s) the config of model '"
                    + config.name() + "' does not account for: " + abbreviate(extra));
        }
        for (Map.Entry<String, long[]> e : expected.entrySet()) {
            SafetensorsFile.TensorInfo info = file.info(e.getKey());
            if (!Arrays.equals(info.shape(), e.getValue())) {
                throw new ModelFormatException(file.path() + ": tensor '" + e.getKey() + "' has shape "
                        + Arrays.toString(info.shape()) + " but config.json implies " + Arrays.toString(e.getValue()));
            }
            if (!info.dtype().isFloatingPoint()) {
                throw new ModelFormatException(file.path() + ": tensor '" + e.getKey() + "' is " + info.dtype()
                        + ", expected F32, F16, BF16 or F64");
            }
        }
    }

    private static String abbreviate(Set<String> names) {
        List<String> list = new ArrayList<>(names);
        return list.size() <= 8 ? list.toString() : list.subList(0, 8) + " and " + (list.size() - 8) + " more";
    }
}
