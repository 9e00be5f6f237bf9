package io.gpupool.model.repository;

import io.gpupool.model.DeviceWeights;
import io.gpupool.model.InferenceModel;
import io.gpupool.model.LoadTarget;
import io.gpupool.model.ModelConfig;
import io.gpupool.model.ModelFormatException;
import io.gpupool.model.bert.BertModel;
import io.gpupool.model.text.TextInputModel;
import io.gpupool.model.text.TextTokenizer;
import io.gpupool.model.mlp.MlpModel;
import io.gpupool.model.safetensors.SafetensorsFile;
import io.gpupool.model.safetensors.SafetensorsFormatException;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.stream.Stream;

/**
 * The models of one folder, loaded onto one or more devices (one replica per {@link LoadTarget}).
 *
 * <pre>
 *   models/                      root
 *     tiny-bert/                 one folder per model; the folder name is the model name
 *       config.json              architecture + "gpupool" serving section (see ModelConfig)
 *       model.safetensors        weights, HuggingFace names
 *       tokenizer.json           optional, BERT only: the model also takes "text" (TextInputModel)
 *     iris-mlp/
 *       config.json
 *       model.safetensors
 * </pre>
 * {@link #load()} visits the folders in name order. For each: parse the config, open and check the
 * safetensors header, check every tensor against the config, upload the weights. A model that fails
 * any step is recorded as {@link State#FAILED} with the reason and is not served; whatever it had
 * uploaded is released first (see {@link DeviceWeights}), so a bad model never half-loads and never
 * stops the others from loading. With several targets a model is READY only if it loaded on all of
 * them; if one device fails, the replicas already loaded on the others are closed again.
 */
public final class ModelRepository implements AutoCloseable {

    public static final String CONFIG_FILE = "config.json";
    public static final String WEIGHTS_FILE = "model.safetensors";

    public enum State { READY, FAILED }

    /** One row of the repository index. {@code reason} is empty for READY models. */
    public record ModelStatus(String name, String version, State state, String reason) {
    }

    private final Path root;
    private final List<LoadTarget> targets;
    /** Model name to its replicas, index-aligned with {@link #targets}. */
    private final Map<String, List<InferenceModel>> ready = new LinkedHashMap<>();
    private final Map<String, ModelStatus> index = new LinkedHashMap<>();

    /** A repository whose models are loaded on one device. */
    public ModelRepository(Path root, LoadTarget target) {
        this(root, List.of(target));
    }

    /** A repository whose models are loaded on every target (one replica per device). */
    public ModelRepository(Path root, List<LoadTarget> targets) {
        if (targets.isEmpty()) {
            throw new IllegalArgumentException("a model repository needs at least one load target");
        }
        this.root = root;
        this.targets = List.copyOf(targets);
    }

    /**
     * Scans the root and loads every model not loaded yet; returns the index. Fails only if the root
     * itself cannot be listed: per-model failures are recorded, not thrown.
     */
    public synchronized List<ModelStatus> load() {
        List<Path> folders;
        try (Stream<Path> children = Files.list(root)) {
            folders = children.filter(Files::isDirectory).sorted().toList();
        } catch (IOException e) {
            throw new IllegalStateException("model repository " + root + " cannot be listed: " + e.getMessage(), e);
        }
        for (Path folder : folders) {
            String name = folder.getFileName().toString();
            if (ready.containsKey(name)) {
                continue;
            }
            List<InferenceModel> replicas = new ArrayList<>();
            try {
                for (LoadTarget target : targets) {
                    replicas.add(loadModel(name, folder, target));
                }
                ready.put(name, List.copyOf(replicas));
                index.put(name, new ModelStatus(name, replicas.getFirst().version(), State.READY, ""));
            } catch (RuntimeException e) {
                for (InferenceModel loaded : replicas) {
                    try {
                        loaded.close();
                    } catch (RuntimeException closeFailure) {
                        e.addSuppressed(closeFailure);
                    }
                }
                index.put(name, new ModelStatus(name, "", State.FAILED, describe(e)));
            }
        }
        return index();
    }

    private static String describe(Throwable e) {
        String message = e.getMessage();
        return e instanceof ModelFormatException || e instanceof SafetensorsFormatException
                || e instanceof IllegalArgumentException
                ? message : e.getClass().getSimpleName() + (message == null ? "" : ": " + message);
    }

    /** Loads the model in {@code folder} onto {@code target}; fails with the reason, leaving nothing allocated. */
    public static InferenceModel loadModel(String name, Path folder, LoadTarget target) {
        Path configPath = folder.resolve(CONFIG_FILE);
        Path weightsPath = folder.resolve(WEIGHTS_FILE);
        if (!Files.isRegularFile(configPath)) {
            throw new ModelFormatException(folder + ": no " + CONFIG_FILE);
        }
        if (!Files.isRegularFile(weightsPath)) {
            throw new ModelFormatException(folder + ": no " + WEIGHTS_FILE);
        }
        ModelConfig config = ModelConfig.read(name, configPath);
        Path tokenizerPath = folder.resolve(TextTokenizer.FILE);
        // The tokenizer first: a bad tokenizer.json then fails the model before any weight is uploaded.
        TextTokenizer tokenizer = config.architecture() instanceof ModelConfig.Bert && Files.isRegularFile(tokenizerPath)
                ? TextTokenizer.load(tokenizerPath, config.serving().maxSequenceLength()) : null;
        InferenceModel model;
        try (SafetensorsFile file = SafetensorsFile.open(weightsPath)) {
            model = switch (config.architecture()) {
                case ModelConfig.Bert ignored -> BertModel.load(config, file, target);
                case ModelConfig.Mlp ignored -> MlpModel.load(config, file, target);
            };
        } catch (RuntimeException e) {
            if (tokenizer != null) {
                tokenizer.close();
            }
            throw e;
        }
        if (tokenizer == null) {
            return model;
        }
        try {
            return TextInputModel.wrap(model, tokenizer);
        } catch (RuntimeException e) {
            tokenizer.close();
            model.close();
            throw e;
        }
    }

    /** Every model seen, READY or FAILED, in name order. */
    public synchronized List<ModelStatus> index() {
        return List.copyOf(new ArrayList<>(index.values()));
    }

    /** The READY model called {@code name}, its replica on the first target. */
    public synchronized Optional<InferenceModel> model(String name) {
        List<InferenceModel> replicas = ready.get(name);
        return replicas == null ? Optional.empty() : Optional.of(replicas.getFirst());
    }

    /** The replicas of READY model {@code name}, one per target in the targets' order (empty if none). */
    public synchronized List<InferenceModel> replicas(String name) {
        return ready.getOrDefault(name, List.of());
    }

    /** Every READY model (its first replica), in name order. */
    public synchronized List<InferenceModel> models() {
        return ready.values().stream().map(List::getFirst).toList();
    }

    public Path root() {
        return root;
    }

    /** Frees every loaded model's weights. */
    @Override
    public synchronized void close() {
        RuntimeException failure = null;
        for (InferenceModel model : ready.values().stream().flatMap(List::stream).toList()) {
            try {
                model.close();
            } catch (RuntimeException e) {
                if (failure == null) {
                    failure = e;
                } else {
                    failure.addSuppressed(e);
                }
            }
        }
        ready.clear();
        index.clear();
        if (failure != null) {
            throw failure;
        }
    }
}
