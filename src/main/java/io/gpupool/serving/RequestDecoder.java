package io.gpupool.serving;

import io.gpupool.model.BytesElements;
import io.gpupool.model.DataType;
import io.gpupool.model.HostTensor;
import io.gpupool.model.TensorSpec;
import io.gpupool.serving.protocol.BoundedDataDeserializer;
import io.gpupool.serving.protocol.InferenceRequest;
import io.gpupool.serving.protocol.InferenceRequest.RequestInput;
import io.gpupool.serving.protocol.InferenceRequest.RequestOutput;
import tools.jackson.core.JacksonException;
import tools.jackson.core.StreamReadFeature;
import tools.jackson.databind.MapperFeature;
import tools.jackson.databind.cfg.CoercionAction;
import tools.jackson.databind.cfg.CoercionInputShape;
import tools.jackson.databind.type.LogicalType;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.DeserializationFeature;
import tools.jackson.databind.ObjectMapper;
import tools.jackson.databind.ObjectReader;
import tools.jackson.databind.exc.MismatchedInputException;

import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.stream.Collectors;

/**
 * Turns the bytes of an infer request into a {@link ValidatedRequest}, or a 400 naming the problem.
 *
 * <p>Body layout with the binary tensor data extension:
 * <pre>
 *   |&lt;-- Inference-Header-Content-Length --&gt;|&lt;- input a bytes -&gt;|&lt;- input c bytes -&gt;|
 *   |  JSON request (inputs, outputs, ...)   |   binary section, in the order of the inputs   |
 *                                              that carry parameters.binary_data_size
 * </pre>
 * Without the header the whole body is JSON.
 *
 * <p>Checks, in order: JSON well-formed and strict (no duplicate keys, no string-for-number coercion);
 * an {@code id} of at most {@value #MAX_ID_LENGTH} characters; at least one input; each input declared
 * by the model, once; datatype equal to the declared one; rank and fixed dimensions as declared; batch
 * (dimension 0 where it is variable) at least 1 and within min(model, server) and equal across inputs;
 * sequence length (dimension 1 where variable, for models that declare a maximum) within min(model,
 * server); data flat or nested exactly as the shape, as many elements as the shape needs, floats finite
 * (JSON and binary alike); all binary bytes consumed; requested outputs declared, once each; a
 * {@code timeout} of at most one day. Whether an input may be left out is the model's decision (it
 * fails with a message). Values the client sent are repeated in messages clipped ({@link Shown}).
 */
public final class RequestDecoder {

    /** Longest request {@code id} accepted; it is echoed in the response. */
    static final int MAX_ID_LENGTH = 256;
    /** Longest {@code timeout} parameter: one day in microseconds (a duration beyond it overflows nothing but means nothing). */
    static final long MAX_TIMEOUT_MICROS = 86_400_000_000L;

    /**
     * Reads request headers strictly: a fraction where an integer belongs (a shape of [1.5, 4]) is an
     * error, not truncated; a string where a number belongs ({@code "1"}) or a number where a string belongs
     * is an error, not coerced; a key given twice in one object is an error, not "the last one wins".
     */
    private final ObjectReader requestReader;
    private final int serverMaxBatch;
    private final int serverMaxSequence;
    private final Duration defaultTimeout;

    public RequestDecoder(ObjectMapper json, int serverMaxBatch, int serverMaxSequence, Duration defaultTimeout) {
        this.requestReader = json.rebuild().disable(MapperFeature.ALLOW_COERCION_OF_SCALARS)
                .withCoercionConfig(LogicalType.Textual, strings -> strings
                        .setCoercion(CoercionInputShape.Integer, CoercionAction.Fail)
                        .setCoercion(CoercionInputShape.Float, CoercionAction.Fail)
                        .setCoercion(CoercionInputShape.Boolean, CoercionAction.Fail))
                .build()
                .readerFor(InferenceRequest.class)
                .without(DeserializationFeature.ACCEPT_FLOAT_AS_INT)
                .with(StreamReadFeature.STRICT_DUPLICATE_DETECTION);
        this.serverMaxBatch = serverMaxBatch;
        this.serverMaxSequence = serverMaxSequence;
        this.defaultTimeout = defaultTimeout;
    }

    /**
     * @param headerLength value of {@code Inference-Header-Content-Length}, or null when absent
     */
    public ValidatedRequest decode(ServedModel model, byte[] body, String headerLength) {
        int jsonLength = body.length;
        if (headerLength != null) {
            long parsed;
            try {
                parsed = Long.parseLong(headerLength.trim());
            } catch (NumberFormatException e) {
                throw ServingException.badRequest("header Inference-Header-Content-Length is not a number: '"
                        + Shown.clip(headerLength) + "'");
            }
            if (parsed == 0) {
                return raw(model, body);
            }
            if (parsed < 0 || parsed > body.length) {
                throw ServingException.badRequest("header Inference-Header-Content-Length is " + parsed
                        + " but the body has " + body.length + " bytes");
            }
            jsonLength = (int) parsed;
        }
        InferenceRequest request;
        try {
            request = requestReader.withAttribute(BoundedDataDeserializer.MAX_ELEMENTS, dataBound(model))
                    .readValue(body, 0, jsonLength);
        } catch (JacksonException e) {
            if (headerLength == null && declaresBinaryData(body)) {
                throw ServingException.badRequest("the request declares binary_data_size but has no header "
                        + InferenceHandler.HEADER_LENGTH + " saying where its JSON ends and the binary data begins");
            }
            String within = headerLength == null || !looksCut(e) ? "" : " (its first " + jsonLength + " bytes, as header "
                    + InferenceHandler.HEADER_LENGTH + " says; check that it counts the JSON exactly)";
            throw ServingException.badRequest("malformed inference request JSON" + within + ": " + jsonProblem(e));
        }
        if (request == null) {
            throw ServingException.badRequest("empty inference request body");
        }
        return validate(model, request, body, jsonLength);
    }

    /** Whether the JSON ended early or ran into bytes no JSON holds: what a wrong header length does. */
    private static boolean looksCut(JacksonException e) {
        String reason = String.valueOf(e.getOriginalMessage());
        return reason.contains("end-of-input") || reason.contains("Illegal character") || reason.contains("Unexpected character");
    }

    /**
     * Whether an unparsable body names the binary extension's parameter: then the likely mistake is the missing
     * header, not the JSON, and the message should say so. Only the refusal path scans the body.
     */
    private static boolean declaresBinaryData(byte[] body) {
        byte[] marker = "\"binary_data_size\"".getBytes(java.nio.charset.StandardCharsets.US_ASCII);
        outer:
        for (int i = 0; i + marker.length <= body.length; i++) {
            for (int j = 0; j < marker.length; j++) {
                if (body[i + j] != marker[j]) {
                    continue outer;
                }
            }
            return true;
        }
        return false;
    }

    /**
     * The most elements any input of {@code model} can take within the batch and sequence limits, so that
     * JSON data is refused while it is parsed once it passes them; a dimension with no limit leaves the
     * element count to the body-size limit.
     */
    private BoundedDataDeserializer.Bound dataBound(ServedModel model) {
        long most = 0;
        for (TensorSpec spec : model.inputs()) {
            long elements = 1;
            long[] shape = spec.shape();
            for (int i = 0; i < shape.length && elements > 0; i++) {
                long dimension = shape[i];
                if (dimension == -1) {
                    dimension = i == 0 ? model.batchLimit(serverMaxBatch)
                            : i == 1 && model.sequenceLimit(serverMaxSequence) > 0 ? model.sequenceLimit(serverMaxSequence)
                            : -1;
                }
                elements = dimension < 0 ? -1 : Math.multiplyHigh(elements, dimension) != 0 ? -1 : elements * dimension;
            }
            if (elements < 0) {
                return null;
            }
            most = Math.max(most, elements);
        }
        return new BoundedDataDeserializer.Bound(most, model.name());
    }

    /**
     * Triton's raw binary request ({@code Inference-Header-Content-Length: 0}): the whole body is the
     * data of the model's only input, whose dimensions other than a variable batch are fixed; the batch
     * is what the bytes make (for BYTES, the number of elements); every output is answered as JSON.
     */
    private ValidatedRequest raw(ServedModel model, byte[] body) {
        if (model.inputs().size() != 1) {
            throw ServingException.badRequest("a raw binary request (Inference-Header-Content-Length: 0) needs a "
                    + "model with exactly one input; model '" + model.name() + "' has " + names(model.inputs()));
        }
        TensorSpec spec = model.inputs().getFirst();
        long[] shape = spec.shape();
        long rowElements = 1;
        for (int i = 1; i < shape.length; i++) {
            if (shape[i] < 0) {
                throw ServingException.badRequest("a raw binary request needs every dimension of input '"
                        + spec.name() + "' but the batch to be fixed; model '" + model.name() + "' declares "
                        + Arrays.toString(shape));
            }
            rowElements = Math.multiplyExact(rowElements, shape[i]);
        }
        boolean batched = shape.length > 0 && shape[0] == -1;
        long elements;
        if (spec.dataType().isFixedSize()) {
            long rowBytes = rowElements * spec.dataType().byteSize();
            if (body.length == 0 || rowBytes == 0 || body.length % rowBytes != 0) {
                throw ServingException.badRequest("raw binary request: " + body.length + " bytes are not a whole "
                        + "number of rows of input " + spec + " (" + rowBytes + " bytes each)");
            }
            elements = body.length / spec.dataType().byteSize();
        } else {
            elements = BytesElements.count(MemorySegment.ofArray(body), Integer.MAX_VALUE);
            if (elements <= 0 || elements % rowElements != 0) {
                throw ServingException.badRequest("raw binary request: the body is not a whole number of rows of "
                        + "BYTES input " + spec + " (each element a 4-byte little-endian length, then its bytes)");
            }
        }
        long rows = elements / rowElements;
        if (batched) {
            shape[0] = rows;
        } else if (rows != 1) {
            throw ServingException.badRequest("raw binary request: input " + spec + " takes exactly one row, "
                    + "the body holds " + rows);
        }
        int maxBatch = model.batchLimit(serverMaxBatch);
        if (batched && rows > maxBatch) {
            throw ServingException.badRequest("raw binary request: batch size " + rows + " is outside 1.." + maxBatch
                    + " (model '" + model.name() + "')");
        }
        if (TensorCodec.isFloatingPoint(spec.dataType())) {
            TensorCodec.requireFinite(spec.name(), spec.dataType(), body);   // as for a binary section of a JSON header
        }
        List<ValidatedRequest.Output> outputs = model.outputs().stream()
                .map(output -> new ValidatedRequest.Output(output.name(), false)).toList();
        return new ValidatedRequest(null, model,
                List.of(new ValidatedRequest.Input(spec.name(), spec.dataType(), shape, body)), outputs, defaultTimeout);
    }

    private ValidatedRequest validate(ServedModel model, InferenceRequest request, byte[] body, int binaryStart) {
        if (request.id() != null && request.id().length() > MAX_ID_LENGTH) {
            throw ServingException.badRequest("'id' has " + request.id().length() + " characters; at most "
                    + MAX_ID_LENGTH + " are allowed");
        }
        if (request.inputs() == null || request.inputs().isEmpty()) {
            throw ServingException.badRequest("inference request has no inputs; model '" + model.name()
                    + "' expects " + names(model.inputs()));
        }
        Map<String, TensorSpec> declared = new LinkedHashMap<>();
        model.inputs().forEach(spec -> declared.put(spec.name(), spec));
        int maxBatch = model.batchLimit(serverMaxBatch);
        int maxSequence = model.sequenceLimit(serverMaxSequence);

        Map<String, ValidatedRequest.Input> inputs = new HashMap<>();
        long binaryOffset = binaryStart;
        long batch = -1;
        String batchInput = null;
        for (RequestInput input : request.inputs()) {
            if (input == null || input.name() == null) {
                throw ServingException.badRequest("every input needs a 'name'");
            }
            String name = input.name();
            TensorSpec spec = declared.get(name);
            if (spec == null) {
                throw ServingException.badRequest("unknown input '" + Shown.clip(name) + "' for model '" + model.name()
                        + "'; expected " + names(model.inputs()));
            }
            if (inputs.containsKey(name)) {
                throw ServingException.badRequest("input '" + name + "' is given more than once");
            }
            DataType type = dataType(name, input.datatype());
            if (type != spec.dataType()) {
                throw ServingException.badRequest("input '" + name + "' has datatype " + type.protocolName()
                        + " but model '" + model.name() + "' expects " + spec.dataType().protocolName());
            }
            long[] shape = shape(name, input.shape(), spec);
            long[] declaredShape = spec.shape();
            if (declaredShape.length > 0 && declaredShape[0] == -1) {
                if (shape[0] < 1 || shape[0] > maxBatch) {
                    throw ServingException.badRequest("input '" + name + "': batch size " + shape[0]
                            + " is outside 1.." + maxBatch + " (model '" + model.name() + "' allows "
                            + model.maxBatchSize() + ", gpupool.serving.max-batch-size=" + serverMaxBatch + ")");
                }
                if (batch >= 0 && shape[0] != batch) {
                    throw ServingException.badRequest("input '" + name + "' has batch size " + shape[0]
                            + " but input '" + batchInput + "' has " + batch);
                }
                batch = shape[0];
                batchInput = name;
            }
            if (maxSequence > 0 && declaredShape.length > 1 && declaredShape[1] == -1
                    && (shape[1] < 1 || shape[1] > maxSequence)) {
                throw ServingException.badRequest("input '" + name + "': sequence length " + shape[1]
                        + " is outside 1.." + maxSequence + " (model '" + model.name() + "' allows "
                        + model.maxSequenceLength() + ", gpupool.serving.max-sequence-length="
                        + serverMaxSequence + ")");
            }
            long elements = HostTensor.elementCount(shape);
            long bytes;
            try {
                bytes = Math.multiplyExact(elements, type.byteSize());
            } catch (ArithmeticException e) {
                throw ServingException.badRequest("input '" + name + "': shape " + Arrays.toString(shape) + " is too large");
            }
            if (parameter(input.parameters(), "shared_memory_region") != null) {
                throw ServingException.badRequest("input '" + name + "' names a shared-memory region: "
                        + SharedMemoryHandler.unsupported("system or CUDA"));
            }
            JsonNode binarySize = parameter(input.parameters(), "binary_data_size");
            byte[] data;
            if (binarySize != null) {
                if (input.data() != null && !input.data().isNull()) {
                    throw ServingException.badRequest("input '" + name
                            + "' has both 'data' and the binary_data_size parameter");
                }
                if (!binarySize.isIntegralNumber() || binarySize.isBigInteger() || binarySize.longValue() < 0) {
                    throw ServingException.badRequest("input '" + name
                            + "': binary_data_size must be a non-negative integer, was " + binarySize);
                }
                long size = binarySize.longValue();
                if (!type.isFixedSize()) {
                    bytes = size;   // checked below: the section must hold exactly the shape's elements
                }
                if (size != bytes) {
                    throw ServingException.badRequest("input '" + name + "': binary_data_size is " + size
                            + " bytes but shape " + Arrays.toString(shape) + " of " + type.protocolName()
                            + " needs " + bytes);
                }
                if (size > body.length - binaryOffset) {            // not offset + size: that overflows near 2^63
                    throw ServingException.badRequest("input '" + name + "': binary section ends after "
                            + (body.length - binaryOffset) + " of the " + size + " bytes it declares");
                }
                data = Arrays.copyOfRange(body, (int) binaryOffset, (int) (binaryOffset + size));
                binaryOffset += size;
                if (TensorCodec.isFloatingPoint(type)) {
                    TensorCodec.requireFinite(name, type, data);
                }
                if (!type.isFixedSize()) {
                    long found = BytesElements.count(MemorySegment.ofArray(data), elements);
                    if (found != elements) {
                        throw ServingException.badRequest("input '" + name + "': shape " + Arrays.toString(shape)
                                + " needs " + elements + " BYTES elements (each a 4-byte little-endian length, then "
                                + "its bytes), the binary section holds " + (found < 0 ? "a cut-short element"
                                : found > elements ? "more" : String.valueOf(found)));
                    }
                }
            } else {
                data = TensorCodec.fromJson(name, type, shape, input.data());
            }
            inputs.put(name, new ValidatedRequest.Input(name, type, shape, data));
        }
        if (binaryOffset != body.length) {
            throw ServingException.badRequest("binary section has " + (body.length - binaryOffset)
                    + " bytes that no input claims (check binary_data_size)");
        }
        // Declared inputs may be optional (BERT's attention_mask, token_type_ids): the model names a missing
        // required one itself, before it allocates anything.
        List<ValidatedRequest.Input> ordered = new ArrayList<>();
        for (TensorSpec spec : model.inputs()) {
            ValidatedRequest.Input input = inputs.get(spec.name());
            if (input != null) {
                ordered.add(input);
            }
        }
        return new ValidatedRequest(request.id(), model, ordered, outputs(model, request), timeout(request));
    }

    private static List<ValidatedRequest.Output> outputs(ServedModel model, InferenceRequest request) {
        boolean binaryByDefault = flag(request.parameters(), "binary_data_output", "request", false);
        Set<String> declared = model.outputs().stream().map(TensorSpec::name).collect(Collectors.toSet());
        List<ValidatedRequest.Output> outputs = new ArrayList<>();
        if (request.outputs() == null || request.outputs().isEmpty()) {
            for (TensorSpec spec : model.outputs()) {
                outputs.add(new ValidatedRequest.Output(spec.name(), binaryByDefault));
            }
            return outputs;
        }
        Set<String> seen = new HashSet<>();
        for (RequestOutput output : request.outputs()) {
            if (output == null || output.name() == null) {
                throw ServingException.badRequest("every requested output needs a 'name'");
            }
            if (!declared.contains(output.name())) {
                throw ServingException.badRequest("unknown output '" + Shown.clip(output.name()) + "' for model '"
                        + model.name() + "'; expected " + names(model.outputs()));
            }
            if (!seen.add(output.name())) {
                throw ServingException.badRequest("output '" + output.name() + "' is requested more than once");
            }
            if (parameter(output.parameters(), "shared_memory_region") != null) {
                throw ServingException.badRequest("output '" + output.name() + "' names a shared-memory region: "
                        + SharedMemoryHandler.unsupported("system or CUDA"));
            }
            boolean binary = flag(output.parameters(), "binary_data", "output '" + output.name() + "'", binaryByDefault);
            outputs.add(new ValidatedRequest.Output(output.name(), binary, classification(model, output)));
        }
        return outputs;
    }

    /**
     * The output's {@code classification} parameter: 0 where absent (or 0, as Triton's clients send for "no
     * classification"), else the number of classes to return per row. Only outputs of numbers are classified.
     */
    private static int classification(ServedModel model, RequestOutput output) {
        JsonNode count = parameter(output.parameters(), "classification");
        if (count == null || count.isNull()) {
            return 0;
        }
        if (!count.isIntegralNumber() || count.isBigInteger() || count.longValue() < 0
                || count.longValue() > Integer.MAX_VALUE) {
            throw ServingException.badRequest("output '" + output.name() + "': parameter 'classification' must be a "
                    + "non-negative integer (the number of classes to return), was " + Shown.clip(count.toString()));
        }
        TensorSpec spec = model.outputs().stream().filter(s -> s.name().equals(output.name())).findFirst().orElseThrow();
        if (count.intValue() > 0 && !spec.dataType().isFixedSize()) {
            throw ServingException.badRequest("output '" + output.name() + "' is " + spec.dataType().protocolName()
                    + "; parameter 'classification' needs an output of numbers");
        }
        return count.intValue();
    }

    private Duration timeout(InferenceRequest request) {
        JsonNode timeout = parameter(request.parameters(), "timeout");
        if (timeout == null) {
            return defaultTimeout;
        }
        if (!timeout.isIntegralNumber() || timeout.isBigInteger() || timeout.longValue() < 0) {
            throw ServingException.badRequest("parameter 'timeout' must be a non-negative integer number of "
                    + "microseconds, was " + Shown.clip(timeout.toString()));
        }
        long micros = timeout.longValue();
        if (micros > MAX_TIMEOUT_MICROS) {
            throw ServingException.badRequest("parameter 'timeout' must be at most " + MAX_TIMEOUT_MICROS
                    + " microseconds (one day), was " + micros);
        }
        return micros == 0 ? defaultTimeout : Duration.ofNanos(micros * 1_000L);
    }

    private static DataType dataType(String input, String name) {
        if (name == null) {
            throw ServingException.badRequest("input '" + input + "' has no 'datatype'");
        }
        try {
            return DataType.fromProtocolName(name);
        } catch (IllegalArgumentException e) {
            throw ServingException.badRequest("input '" + input + "': unsupported datatype '" + Shown.clip(name)
                    + "', expected one of " + Arrays.toString(DataType.values()));
        }
    }

    private static long[] shape(String input, List<Long> given, TensorSpec spec) {
        long[] declared = spec.shape();
        if (given == null) {
            throw ServingException.badRequest("input '" + input + "' has no 'shape'");
        }
        if (given.size() != declared.length) {
            throw ServingException.badRequest("input '" + input + "' has shape " + Shown.clip(given.toString()) + " of rank "
                    + given.size() + " but the model declares " + Arrays.toString(declared));
        }
        long[] shape = new long[given.size()];
        for (int i = 0; i < shape.length; i++) {
            Long dimension = given.get(i);
            if (dimension == null || dimension < 0) {
                throw ServingException.badRequest("input '" + input + "' has an invalid dimension in shape " + given);
            }
            if (declared[i] != -1 && declared[i] != dimension) {
                throw ServingException.badRequest("input '" + input + "' has shape " + given
                        + " but the model declares " + Arrays.toString(declared) + " (dimension " + i + " must be "
                        + declared[i] + ")");
            }
            shape[i] = dimension;
        }
        try {
            HostTensor.elementCount(shape);
        } catch (ArithmeticException e) {
            throw ServingException.badRequest("input '" + input + "': shape " + given + " is too large");
        }
        return shape;
    }

    private static JsonNode parameter(Map<String, JsonNode> parameters, String name) {
        if (parameters == null) {
            return null;
        }
        JsonNode value = parameters.get(name);
        return value == null || value.isNull() ? null : value;
    }

    private static boolean flag(Map<String, JsonNode> parameters, String name, String where, boolean otherwise) {
        JsonNode value = parameter(parameters, name);
        if (value == null) {
            return otherwise;
        }
        if (!value.isBoolean()) {
            throw ServingException.badRequest(where + " parameter '" + name + "' must be true or false, was " + value);
        }
        return value.booleanValue();
    }

    private static String names(List<TensorSpec> specs) {
        return specs.stream().map(TensorSpec::toString).collect(Collectors.joining(", ", "[", "]"));
    }

    /**
     * What the JSON got wrong, in the protocol's terms: a value of the wrong kind is named by its place in the
     * request and the kind it must be ({@code inputs[0].shape[0] must be an integer}), not by the Java types it
     * would have been read into; a syntax error keeps the parser's own words.
     */
    static String jsonProblem(JacksonException e) {
        if (e instanceof MismatchedInputException mismatch && mismatch.getTargetType() != null) {
            return (mismatch.getPath().isEmpty() ? "the request body" : place(mismatch.getPath())) + " must be "
                    + kind(mismatch.getTargetType());
        }
        return e.getOriginalMessage();
    }

    private static String place(List<JacksonException.Reference> path) {
        StringBuilder place = new StringBuilder();
        for (JacksonException.Reference step : path) {
            if (step.getPropertyName() != null) {
                place.append(place.isEmpty() ? "" : ".").append(Shown.clip(step.getPropertyName()));
            } else {
                place.append('[').append(step.getIndex()).append(']');
            }
        }
        return place.toString();
    }

    private static String kind(Class<?> type) {
        if (type == String.class) {
            return "a string";
        }
        if (type == Long.class || type == long.class || type == Integer.class || type == int.class) {
            return "an integer";
        }
        if (Number.class.isAssignableFrom(type) || type == double.class || type == float.class) {
            return "a number";
        }
        if (type == Boolean.class || type == boolean.class) {
            return "true or false";
        }
        if (Collection.class.isAssignableFrom(type) || type.isArray()) {
            return "an array";
        }
        return "an object";
    }
}
