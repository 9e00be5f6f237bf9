package io.gpupool.model.bert;

import io.gpupool.model.DeviceWeights;

/**
 * The device addresses of one encoder layer's weights, under HuggingFace's names below {@code layerPrefix}
 * ({@code [bert.]encoder.layer.N.}); the padded and the packed forward build their steps on the same layer.
 */
record BertLayerWeights(long qkv, long qkvBias, long attentionOut, long attentionOutBias, long attentionNorm,
                        long attentionNormBias, long intermediate, long intermediateBias, long output,
                        long outputBias, long outputNorm, long outputNormBias) {

    static BertLayerWeights of(DeviceWeights weights, String layerPrefix) {
        return new BertLayerWeights(
                weights.address(layerPrefix + "attention.self.qkv.weight"),
                weights.address(layerPrefix + "attention.self.qkv.bias"),
                weights.address(layerPrefix + "attention.output.dense.weight"),
                weights.address(layerPrefix + "attention.output.dense.bias"),
                weights.address(layerPrefix + "attention.output.LayerNorm.weight"),
                weights.address(layerPrefix + "attention.output.LayerNorm.bias"),
                weights.address(layerPrefix + "intermediate.dense.weight"),
                weights.address(layerPrefix + "intermediate.dense.bias"),
                weights.address(layerPrefix + "output.dense.weight"),
                weights.address(layerPrefix + "output.dense.bias"),
                weights.address(layerPrefix + "output.LayerNorm.weight"),
                weights.address(layerPrefix + "output.LayerNorm.bias"));
    }
}
