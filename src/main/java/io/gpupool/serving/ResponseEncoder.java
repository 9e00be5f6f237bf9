package io.gpupool.serving;

import io.gpupool.model.HostTensor;
import tools.jackson.core.JsonGenerator;
import tools.jackson.databind.ObjectMapper;

import java.io.ByteArrayOutputStream;
import java.lang.foreign.MemorySegment;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * Writes the inference response: model name and version, the echoed id, then the selected outputs in
 * the order they were requested. An output sent as binary data carries
 * {@code parameters.binary_data_size} instead of {@code data}; its bytes follow the JSON in the same order.
 */
final class ResponseEncoder {

    private final ObjectMapper json;

    ResponseEncoder(ObjectMapper json) {
        this.json = json;
    }

    EncodedResponse encode(ValidatedRequest request, List<HostTensor> produced) {
        Map<String, HostTensor> producedByName = new HashMap<>();
        for (HostTensor tensor : produced) {
            producedByName.put(tensor.name(), tensor);
        }
        Map<String, HostTensor> byName = new HashMap<>();
        for (ValidatedRequest.Output selected : request.outputs()) {
            HostTensor tensor = producedByName.get(selected.name());
            if (tensor == null) {
                throw new IllegalStateException("model '" + request.model().name() + "' did not produce output '"
                        + selected.name() + "'");
            }
            requireFinite(tensor);
            byName.put(selected.name(), selected.classification() > 0 ? classified(request.model(), tensor,
                    selected.classification()) : tensor);
        }
        ByteArrayOutputStream out = new ByteArrayOutputStream(expectedBytes(request, byName));
        try (JsonGenerator generator = json.createGenerator(out)) {
            generator.writeStartObject();
            generator.writeStringProperty("model_name", request.model().name());
            generator.writeStringProperty("model_version", request.model().version());
            if (request.id() != null) {
                generator.writeStringProperty("id", request.id());
            }
            generator.writeName("outputs");
            generator.writeStartArray();
            for (ValidatedRequest.Output selected : request.outputs()) {
                HostTensor tensor = byName.get(selected.name());
                generator.writeStartObject();
                generator.writeStringProperty("name", tensor.name());
                generator.writeStringProperty("datatype", tensor.dataType().protocolName());
                generator.writeName("shape");
                long[] shape = tensor.shape();
                generator.writeArray(shape, 0, shape.length);
                if (selected.binary()) {
                    generator.writeName("parameters");
                    generator.writeStartObject();
                    generator.writeNumberProperty("binary_data_size", tensor.data().byteSize());
                    generator.writeEndObject();
                } else {
                    generator.writeName("data");
                    TensorCodec.writeJson(generator, out, tensor.dataType(), tensor.data());
                }
                generator.writeEndObject();
            }
            generator.writeEndArray();
            generator.writeEndObject();
        }
        int jsonLength = out.size();
        for (ValidatedRequest.Output selected : request.outputs()) {
            if (selected.binary()) {
                MemorySegment data = byName.get(selected.name()).data();
                out.writeBytes(data.toArray(java.lang.foreign.ValueLayout.JAVA_BYTE));
            }
        }
        return new EncodedResponse(out.toByteArray(), jsonLength);
    }

    /** The classification extension's result for an output: its declared batch axis decides what a row is. */
    private static HostTensor classified(ServedModel model, HostTensor tensor, int k) {
        long[] declared = model.outputs().stream().filter(spec -> spec.name().equals(tensor.name())).findFirst()
                .map(spec -> spec.shape()).orElse(new long[0]);
        boolean batched = model.maxBatchSize() > 0 && declared.length > 0 && declared[0] == -1;
        return Classification.topK(tensor, k, batched, model.classLabels(tensor.name()));
    }

    /**
     * About what the response takes, so that its buffer is not regrown and copied a few times on the way: the
     * JSON around the data, up to 16 characters per number written as JSON, the bytes of binary outputs.
     */
    private static int expectedBytes(ValidatedRequest request, Map<String, HostTensor> byName) {
        long bytes = 512;
        for (ValidatedRequest.Output selected : request.outputs()) {
            HostTensor tensor = byName.get(selected.name());
            if (tensor != null) {
                long size = tensor.data().byteSize();
                bytes += selected.binary() || !tensor.dataType().isFixedSize() ? size
                        : size / tensor.dataType().byteSize() * 16;
            }
        }
        return (int) Math.min(bytes, 1 << 26);
    }

    /**
     * The rule for non-finite floats holds on the way out too, in JSON and binary alike: JSON has no
     * literal for NaN or infinity, and a binary client would get a value the JSON client could not. Finite
     * inputs that overflow the model's arithmetic are the client's to change, hence 400.
     */
    private static void requireFinite(HostTensor tensor) {
        long index = TensorCodec.firstNonFinite(tensor.dataType(), tensor.data());
        if (index >= 0) {
            throw ServingException.badRequest("output '" + tensor.name() + "' holds a non-finite value at element "
                    + index + " (the inputs are beyond what the model computes in "
                    + tensor.dataType().protocolName() + "); non-finite numbers are never sent");
        }
    }
}
