package io.gpupool.config;

import io.gpupool.backend.DeviceStream;
import io.gpupool.model.InferenceModel;
import io.gpupool.model.LoadTarget;
import io.gpupool.model.repository.ModelRepository;
import io.gpupool.serving.DeviceRuntime;
import io.gpupool.serving.ModelFailure;
import io.gpupool.serving.ModelLoader;
import io.gpupool.serving.ServingException;
import io.gpupool.serving.ModelSource;
import io.gpupool.serving.ServedModel;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The models of the folder {@code gpupool.models.path}, loaded onto every device: one
 * {@link ModelRepository} per device, weights from that device's weights allocator, uploaded on a
 * stream of their own (closed after loading), and served behind the device's graphs where it has
 * them ({@link DeviceGraphSet}). A model is served on the devices where it loaded; one
 * that failed everywhere is reported with the repository's reason.
 */
final class RepositoryModelSource implements ModelSource {

    /** One model of the repository at run time (the repository extension), on the given devices. */
    ModelLoader loader(List<DeviceRuntime> devices) {
        return name -> loadOne(name, devices);
    }

    private ServedModel loadOne(String name, List<DeviceRuntime> devices) {
        Path folder = root.resolve(name);
        if (!Files.isDirectory(folder)) {
            throw ServingException.notFound("no model folder '" + name + "' in the model repository " + root);
        }
        Map<Integer, InferenceModel> replicas = new LinkedHashMap<>();
        try {
            for (DeviceRuntime device : devices) {
                try (DeviceStream stream = device.device().createStream(loadStreamOrdinal)) {
                    device.device().bindToCurrentThread();
                    replicas.put(device.index(), ModelRepository.loadModel(name, folder,
                            new LoadTarget(stream, device.weightsAllocator(), device.ops(), requestArena)));
                }
            }
            return new ServedModel(replicas);
        } catch (RuntimeException e) {
            for (InferenceModel loaded : replicas.values()) {
                try {
                    loaded.close();
                } catch (RuntimeException closeFailure) {
                    e.addSuppressed(closeFailure);
                }
            }
            throw ServingException.badRequest("model '" + name + "' failed to load: " + e.getMessage());
        }
    }

    private static final Logger log = LoggerFactory.getLogger(RepositoryModelSource.class);

    private final Path root;
    /** Ordinal of the loading stream: one past the request streams, so it never shares a local cache. */
    private final int loadStreamOrdinal;
    /** Puts a model loaded on a device behind that device's graphs (identity where it has none). */
    private final DeviceGraphSet graphs;
    /** The models run each forward in one arena ({@code gpupool.serving.request-arena}). */
    private final boolean requestArena;

    RepositoryModelSource(Path root, int loadStreamOrdinal, DeviceGraphSet graphs, boolean requestArena) {
        this.root = root;
        this.loadStreamOrdinal = loadStreamOrdinal;
        this.graphs = graphs;
        this.requestArena = requestArena;
    }

    @Override
    public Loaded load(List<DeviceRuntime> devices) {
        Map<String, Map<Integer, InferenceModel>> replicas = new LinkedHashMap<>();
        Map<String, ModelFailure> failures = new LinkedHashMap<>();
        for (DeviceRuntime device : devices) {
            List<ModelRepository.ModelStatus> index;
            ModelRepository repository;
            try (DeviceStream stream = device.device().createStream(loadStreamOrdinal)) {
                device.device().bindToCurrentThread();
                repository = new ModelRepository(root, new LoadTarget(stream, device.weightsAllocator(), device.ops(),
                        requestArena));
                try {
                    index = repository.load();
                } catch (IllegalStateException e) {
                    log.warn("No models loaded: {}", e.getMessage());
                    return new Loaded(List.of(), List.of());
                }
            }
            for (ModelRepository.ModelStatus status : index) {
                if (status.state() == ModelRepository.State.FAILED) {
                    failures.putIfAbsent(status.name(), new ModelFailure(status.name(), status.version(), status.reason()));
                    log.warn("Model '{}' is not served on device {}: {}", status.name(), device.index(), status.reason());
                }
            }
            for (InferenceModel model : repository.models()) {
                replicas.computeIfAbsent(model.name(), name -> new LinkedHashMap<>())
                        .put(device.index(), graphs.wrap(device.index(), model));
            }
        }
        List<ServedModel> served = new ArrayList<>();
        for (Map<Integer, InferenceModel> byDevice : replicas.values()) {
            served.add(new ServedModel(byDevice));
        }
        List<ModelFailure> failed = failures.values().stream().filter(f -> !replicas.containsKey(f.name())).toList();
        return new Loaded(served, failed);
    }
}
