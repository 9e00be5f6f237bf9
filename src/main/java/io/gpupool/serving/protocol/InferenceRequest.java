package io.gpupool.serving.protocol;

import tools.jackson.databind.JsonNode;
import tools.jackson.databind.annotation.JsonDeserialize;

import java.util.List;
import java.util.Map;

/**
 * The body of {@code POST /v2/models/{m}/infer} (the JSON part when binary data follows).
 *
 * @param id         optional request id, echoed in the response
 * @param parameters request parameters; understood: {@code timeout} (microseconds, as Triton's),
 *                   {@code binary_data_output} (all outputs as binary data unless an output says otherwise)
 * @param inputs     the input tensors, at least one
 * @param outputs    which outputs to return; absent or empty means all of them
 */
public record InferenceRequest(String id, Map<String, JsonNode> parameters, List<RequestInput> inputs,
                               List<RequestOutput> outputs) {

    /**
     * One input tensor. {@code data} is absent when {@code parameters.binary_data_size} is given; its
     * element count is bounded while it is parsed ({@link BoundedDataDeserializer}).
     */
    public record RequestInput(String name, List<Long> shape, String datatype, Map<String, JsonNode> parameters,
                               @JsonDeserialize(using = BoundedDataDeserializer.class) JsonNode data) {
    }

    /** One requested output; {@code parameters.binary_data} asks for it as binary data. */
    public record RequestOutput(String name, Map<String, JsonNode> parameters) {
    }
}
