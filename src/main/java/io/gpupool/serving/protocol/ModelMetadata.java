package io.gpupool.serving.protocol;

import java.util.List;

/** The body of {@code GET /v2/models/{m}[/versions/{v}]}. Variable dimensions are {@code -1}. */
public record ModelMetadata(String name, List<String> versions, String platform, List<MetadataTensor> inputs,
                            List<MetadataTensor> outputs) {

    /** One input or output as the model declares it. */
    public record MetadataTensor(String name, String datatype, long[] shape) {
    }
}
