package io.gpupool.serving;

import io.gpupool.model.DataType;
import io.gpupool.model.TensorSpec;
import io.gpupool.serving.protocol.ModelConfigBody;
import org.springframework.http.MediaType;
import org.springframework.web.reactive.function.server.ServerRequest;
import org.springframework.web.reactive.function.server.ServerResponse;
import reactor.core.publisher.Mono;

import java.util.Arrays;
import java.util.List;
import java.util.function.Function;

/**
 * Triton's model configuration extension: {@code GET /v2/models/{m}[/versions/{v}]/config} answers the
 * model's signature and limits in Triton's JSON, so that clients which size requests from the
 * configuration (tritonclient's {@code get_model_config}, perf_analyzer) work unchanged.
 *
 * <p>A model batches when dimension 0 of its first input is variable: then {@code max_batch_size} is
 * the batch it accepts (the model's limit capped by the server's) and every {@code dims} drops its
 * first dimension; otherwise {@code max_batch_size} is 0 and {@code dims} is the full shape.
 */
public final class ModelConfigHandler {

    private final ModelRegistry registry;
    private final int serverMaxBatch;
    private final int streamsPerDevice;
    private final String deviceKind;
    private final Function<ServedModel, Object> dynamicBatching;

    /**
     * @param deviceKind      {@code KIND_GPU} or {@code KIND_CPU}
     * @param dynamicBatching the {@code dynamic_batching} section of a model, or null when requests are
     *                        not merged for it
     */
    public ModelConfigHandler(ModelRegistry registry, int serverMaxBatch, int streamsPerDevice, String deviceKind,
                              Function<ServedModel, Object> dynamicBatching) {
        this.registry = registry;
        this.serverMaxBatch = serverMaxBatch;
        this.streamsPerDevice = streamsPerDevice;
        this.deviceKind = deviceKind;
        this.dynamicBatching = dynamicBatching;
    }

    public Mono<ServerResponse> config(ServerRequest request) {
        return Mono.defer(() -> {
            ServedModel model = registry.find(request.pathVariable("model"), request.pathVariables().get("version"));
            return ServerResponse.ok().contentType(MediaType.APPLICATION_JSON).bodyValue(of(model));
        }).onErrorResume(ErrorResponses::of);
    }

    ModelConfigBody of(ServedModel model) {
        boolean batches = batches(model);
        int maxBatch = batches ? model.batchLimit(serverMaxBatch) : 0;
        List<Integer> devices = model.replicas().keySet().stream().sorted().toList();
        ModelConfigBody.Parameters parameters = model.maxSequenceLength() > 0
                ? new ModelConfigBody.Parameters(new ModelConfigBody.StringValue(
                        Integer.toString(model.maxSequenceLength())))
                : null;
        return new ModelConfigBody(model.name(), model.platform(), "gpupool",
                new ModelConfigBody.VersionPolicy(new ModelConfigBody.Latest(1)), maxBatch,
                tensors(model.inputs(), batches), tensors(model.outputs(), batches),
                List.of(new ModelConfigBody.InstanceGroup(model.name() + "_0", deviceKind,
                        streamsPerDevice, devices)),
                dynamicBatching.apply(model), parameters);
    }

    private static boolean batches(ServedModel model) {
        long[] first = model.inputs().isEmpty() ? new long[0] : model.inputs().getFirst().shape();
        return first.length > 0 && first[0] == -1;
    }

    private static List<ModelConfigBody.Tensor> tensors(List<TensorSpec> specs, boolean batches) {
        return specs.stream().map(spec -> {
            long[] shape = spec.shape();
            long[] dims = batches && shape.length > 0 ? Arrays.copyOfRange(shape, 1, shape.length) : shape;
            return new ModelConfigBody.Tensor(spec.name(), tritonType(spec.dataType()), dims);
        }).toList();
    }

    /** Triton's {@code TYPE_*} name of a protocol datatype. */
    static String tritonType(DataType type) {
        return type == DataType.BYTES ? "TYPE_STRING" : "TYPE_" + type.protocolName();
    }
}
