package io.gpupool.actuate;

import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Set;
import java.util.stream.Collectors;

import io.gpupool.memory.PoolTuning;
import org.jspecify.annotations.Nullable;
import org.springframework.boot.actuate.endpoint.EndpointId;
import org.springframework.boot.actuate.endpoint.InvocationContext;
import org.springframework.boot.actuate.endpoint.OperationArgumentResolver;
import org.springframework.boot.actuate.endpoint.OperationType;
import org.springframework.boot.actuate.endpoint.SecurityContext;
import org.springframework.boot.actuate.endpoint.invoke.OperationInvoker;
import org.springframework.boot.actuate.endpoint.invoke.OperationInvokerAdvisor;
import org.springframework.boot.actuate.endpoint.invoke.OperationParameter;
import org.springframework.boot.actuate.endpoint.invoke.OperationParameters;

/**
 * Hands an operation of the {@code gpupool} endpoint that takes a {@link PoolTuning} its request body as
 * that one typed value. Boot binds an operation's parameters one body field at a time and ignores the
 * fields no parameter names; binding the whole body here lets {@link TuningRequest} refuse unknown fields
 * and keeps the list of knobs in {@code PoolTuning} alone.
 *
 * <p>The body is every argument except the operation's other parameters (the {@code device} selector). A
 * body that does not bind is answered with the 400 of {@link GpuPoolEndpointWebExtension#badRequest}
 * before the operation runs (the endpoint is exposed over HTTP only), unless the device is unknown or
 * has no pool to tune: then the operation gets an empty tuning, so that its answer (404, or the 400
 * naming the mode) is the one the operator reads, whatever the fields say.
 */
public class TuningBodyBinder implements OperationInvokerAdvisor {

    /** The name of the selector parameter of {@code tune}. */
    static final String DEVICE = "device";

    private final ManagedPools pools;

    public TuningBodyBinder(ManagedPools pools) {
        this.pools = pools;
    }

    @Override
    public OperationInvoker apply(EndpointId endpointId, OperationType operationType, OperationParameters parameters,
                                  OperationInvoker invoker) {
        if (!GpuPoolEndpoint.ID.equals(endpointId.toString()) || operationType != OperationType.WRITE
                || parameters.stream().noneMatch(p -> p.getType() == PoolTuning.class)) {
            return invoker;
        }
        Set<String> others = parameters.stream()
                .filter(p -> p.getType() != PoolTuning.class && p.getType() != GraphTuning.Fields.class)
                .map(OperationParameter::getName).collect(Collectors.toUnmodifiableSet());
        return context -> {
            Map<String, Object> body = new LinkedHashMap<>(context.getArguments());
            body.keySet().removeAll(others);
            GraphTuning.Fields graphs = GraphTuning.Fields.take(body);
            PoolTuning tuning;
            try {
                // a body of graph fields alone tunes the graph cache only
                tuning = tunable(context.getArguments().get(DEVICE)) && !(body.isEmpty() && graphs.any())
                        ? TuningRequest.parse(body) : PoolTuning.none();
            }
            catch (TuningException ex) {
                return GpuPoolEndpointWebExtension.badRequest(ex);
            }
            return invoker.invoke(new InvocationContext(context.resolveArgument(SecurityContext.class),
                    context.getArguments(), OperationArgumentResolver.of(PoolTuning.class, () -> tuning),
                    OperationArgumentResolver.of(GraphTuning.Fields.class, () -> graphs)));
        };
    }

    private boolean tunable(@Nullable Object device) {
        return device instanceof String selector
                && pools.find(selector).map(pool -> pool.configuration() != null).orElse(false);
    }
}
