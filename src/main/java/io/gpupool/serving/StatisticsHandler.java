package io.gpupool.serving;

import io.gpupool.model.InferenceModel;
import io.gpupool.serving.protocol.ModelStatisticsBody;
import io.gpupool.serving.protocol.ModelStatisticsBody.BatchStats;
import io.gpupool.serving.protocol.ModelStatisticsBody.DeviceMemory;
import io.gpupool.serving.protocol.ModelStatisticsBody.InferenceStats;
import io.gpupool.serving.protocol.ModelStatisticsBody.MemoryUsage;
import io.gpupool.serving.protocol.ModelStatisticsBody.ModelStats;
import org.springframework.http.MediaType;
import org.springframework.web.reactive.function.server.ServerRequest;
import org.springframework.web.reactive.function.server.ServerResponse;
import reactor.core.publisher.Mono;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * Triton's statistics extension: {@code GET /v2/models/stats} (every served model) and
 * {@code GET /v2/models/{m}[/versions/{v}]/stats} (one). Figures come from each model's
 * {@link ModelStatistics}; reading them takes no lock.
 */
public final class StatisticsHandler {

    private static final ModelStatisticsBody.Duration NONE = new ModelStatisticsBody.Duration(0, 0);

    private final ModelRegistry registry;
    private final String deviceKind;

    /**
     * @param deviceKind what Triton's {@code memory_usage.type} says of the devices: {@code GPU} or {@code CPU}
     */
    public StatisticsHandler(ModelRegistry registry, String deviceKind) {
        this.registry = registry;
        this.deviceKind = deviceKind;
    }

    /** GET /v2/models/stats. */
    public Mono<ServerResponse> all(ServerRequest request) {
        List<ModelStats> stats = new ArrayList<>();
        for (ServedModel model : registry.models()) {
            stats.add(of(model));
        }
        return ServerResponse.ok().contentType(MediaType.APPLICATION_JSON).bodyValue(new ModelStatisticsBody(stats));
    }

    /** GET /v2/models/{m}[/versions/{v}]/stats. */
    public Mono<ServerResponse> one(ServerRequest request) {
        return Mono.defer(() -> {
            ServedModel model = registry.find(request.pathVariable("model"), request.pathVariables().get("version"));
            return ServerResponse.ok().contentType(MediaType.APPLICATION_JSON)
                    .bodyValue(new ModelStatisticsBody(List.of(of(model))));
        }).onErrorResume(ErrorResponses::of);
    }

    private ModelStats of(ServedModel model) {
        ModelStatistics s = model.statistics();
        InferenceStats inference = new InferenceStats(duration(s.success()), duration(s.fail()), duration(s.queue()),
                duration(s.computeInput()), duration(s.computeInfer()), duration(s.computeOutput()), NONE, NONE);
        List<BatchStats> batches = new ArrayList<>();
        for (ModelStatistics.BatchPhases phases : s.batches()) {
            batches.add(new BatchStats(phases.batchSize(), duration(phases.computeInput()),
                    duration(phases.computeInfer()), duration(phases.computeOutput())));
        }
        List<MemoryUsage> memory = new ArrayList<>();
        for (Map.Entry<Integer, InferenceModel> replica : new TreeMap<>(model.replicas()).entrySet()) {
            memory.add(new MemoryUsage(deviceKind, replica.getKey(), s.weightBytes() == 0 ? 0
                    : replica.getValue().weightBytes()));
        }
        return new ModelStats(model.name(), model.version(), s.lastInferenceMillis(), s.inferenceCount(),
                s.executionCount(), inference, batches, memory,
                new DeviceMemory(s.weightBytes(), s.weightPeakBytes(), s.requestBytes(), s.requestPeakBytes()));
    }

    private static ModelStatisticsBody.Duration duration(ModelStatistics.Duration d) {
        return new ModelStatisticsBody.Duration(d.count(), d.nanos());
    }
}
