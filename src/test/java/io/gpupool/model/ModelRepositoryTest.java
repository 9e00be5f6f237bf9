package io.gpupool.model;

import io.gpupool.model.repository.ModelRepository;
import io.gpupool.kernels.host.HostTensorOps;
import io.gpupool.memory.OutOfDeviceMemoryException;
import io.gpupool.model.repository.ModelRepository.ModelStatus;
import io.gpupool.model.repository.ModelRepository.State;
import io.gpupool.model.safetensors.SafetensorsFile;
import io.gpupool.model.testing.SafetensorsBuilder;
import io.gpupool.model.testing.TestStream;
import io.gpupool.model.testing.TrackingAllocator;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.function.Function;
import java.util.stream.Collectors;

import static io.gpupool.model.testing.Fixtures.fixture;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class ModelRepositoryTest {

    @TempDir
    Path root;

    final TestStream stream = new TestStream(0);
    final TrackingAllocator weights = new TrackingAllocator();
    final LoadTarget target = new LoadTarget(stream, weights, new HostTensorOps());

    @AfterEach
    void tearDown() {
        stream.close();
        weights.close();
    }

    private Path copy(String fixtureName, String as) throws IOException {
        Path folder = Files.createDirectories(root.resolve(as));
        Files.copy(fixture(fixtureName).resolve("config.json"), folder.resolve("config.json"));
        Files.copy(fixture(fixtureName).resolve("model.safetensors"), folder.resolve("model.safetensors"));
        return folder;
    }

    /** Rewrites a copied model's weights through {@code edit} (name -> shape, all F32). */
    private void rewriteWeights(Path folder, java.util.function.Consumer<Map<String, long[]>> edit) throws IOException {
        Path file = folder.resolve("model.safetensors");
        Map<String, long[]> shapes = new java.util.LinkedHashMap<>();
        try (SafetensorsFile st = SafetensorsFile.open(file)) {
            st.tensors().forEach((name, info) -> shapes.put(name, info.shape()));
        }
        edit.accept(shapes);
        SafetensorsBuilder.allF32(shapes).write(file);
    }

    private void editConfig(Path folder, String from, String to) throws IOException {
        Path config = folder.resolve("config.json");
        String text = Files.readString(config);
        assertThat(text).contains(from);
        Files.writeString(config, text.replace(from, to));
    }

    private Map<String, ModelStatus> byName(List<ModelStatus> index) {
        return index.stream().collect(Collectors.toMap(ModelStatus::name, Function.identity()));
    }

    @Test
    void servesGoodModelsAndReportsEachBadOneWithItsReason() throws IOException {
        copy("tiny-bert", "tiny-bert");
        copy("iris-mlp", "iris-mlp");
        rewriteWeights(copy("tiny-bert", "missing-tensor"),
                shapes -> shapes.remove("encoder.layer.1.attention.self.key.bias"));
        rewriteWeights(copy("tiny-bert", "extra-tensor"),
                shapes -> shapes.put("encoder.layer.7.output.dense.weight", new long[]{32, 64}));
        editConfig(copy("tiny-bert", "wrong-shape"), "\"intermediate_size\": 64", "\"intermediate_size\": 48");
        editConfig(copy("tiny-bert", "bad-config"), "\"num_attention_heads\": 4", "\"num_attention_heads\": 5");
        Path truncated = copy("tiny-bert", "truncated").resolve("model.safetensors");
        byte[] bytes = Files.readAllBytes(truncated);
        Files.write(truncated, Arrays.copyOf(bytes, bytes.length / 2));
        Files.delete(copy("iris-mlp", "no-weights").resolve("model.safetensors"));

        try (ModelRepository repository = new ModelRepository(root, target)) {
            Map<String, ModelStatus> index = byName(repository.load());

            assertThat(index.get("tiny-bert").state()).isEqualTo(State.READY);
            assertThat(index.get("iris-mlp").state()).isEqualTo(State.READY);
            assertThat(repository.models()).extracting(InferenceModel::name).containsExactly("iris-mlp", "tiny-bert");
            assertThat(index.get("missing-tensor").reason())
                    .contains("missing 1 tensor(s)", "encoder.layer.1.attention.self.key.bias");
            assertThat(index.get("extra-tensor").reason())
                    .contains("does not account for", "encoder.layer.7.output.dense.weight");
            assertThat(index.get("wrong-shape").reason())
                    .contains("encoder.layer.0.intermediate.dense.weight", "[64, 32]", "implies [48, 32]");
            assertThat(index.get("bad-config").reason())
                    .contains("hidden_size = 32 is not a multiple of num_attention_heads = 5");
            assertThat(index.get("truncated").reason()).contains("truncated");
            assertThat(index.get("no-weights").reason()).contains("no model.safetensors");
            for (String bad : List.of("missing-tensor", "extra-tensor", "wrong-shape", "bad-config", "truncated", "no-weights")) {
                assertThat(index.get(bad).state()).as(bad).isEqualTo(State.FAILED);
                assertThat(repository.model(bad)).as(bad).isEmpty();
            }
            // Only the two good models hold device memory: tiny-bert's 2 layers fuse Q/K/V, so
            // 5 embedding + 2 layers x 12 + 2 pooler = 31 blocks; iris-mlp 4 blocks.
            assertThat(weights.outstandingBlocks()).isEqualTo(31 + 4);
        }
        assertThat(weights.outstandingBlocks()).isZero();
    }

    @Test
    void aModelWhoseUploadFailsHalfwayHoldsNoMemory() throws IOException {
        copy("tiny-bert", "tiny-bert");
        weights.failAtAllocation(20);

        try (ModelRepository repository = new ModelRepository(root, target)) {
            ModelStatus status = repository.load().getFirst();

            assertThat(status.state()).isEqualTo(State.FAILED);
            assertThat(status.reason()).contains("OutOfDeviceMemoryException", "injected");
            assertThat(weights.outstandingBlocks()).isZero();
        }
        assertThatThrownBy(() -> ModelRepository.loadModel("x", fixture("tiny-bert"), new LoadTarget(stream, failing(3), target.ops())))
                .isInstanceOf(OutOfDeviceMemoryException.class);
    }

    private TrackingAllocator failing(int at) {
        TrackingAllocator allocator = new TrackingAllocator();
        allocator.failAtAllocation(at);
        return allocator;
    }

    @Test
    void aModelThatFailsOnOneDeviceIsUnloadedFromTheOthers() throws IOException {
        copy("iris-mlp", "iris");
        TrackingAllocator second = failing(2);
        try (ModelRepository repository = new ModelRepository(root,
                List.of(target, new LoadTarget(stream, second, target.ops())))) {
            ModelStatus status = repository.load().getFirst();

            assertThat(status.state()).isEqualTo(State.FAILED);
            assertThat(repository.replicas("iris")).isEmpty();
            assertThat(weights.outstandingBlocks()).as("replica on the first device closed again").isZero();
            assertThat(second.outstandingBlocks()).isZero();
        }
    }

    @Test
    void everyTargetGetsItsOwnReplica() throws IOException {
        copy("iris-mlp", "iris");
        TrackingAllocator second = new TrackingAllocator();
        try (ModelRepository repository = new ModelRepository(root,
                List.of(target, new LoadTarget(stream, second, target.ops())))) {
            repository.load();

            assertThat(repository.replicas("iris")).hasSize(2);
            assertThat(weights.outstandingBlocks()).isEqualTo(4);
            assertThat(second.outstandingBlocks()).isEqualTo(4);
        }
        assertThat(second.outstandingBlocks()).isZero();
    }

    @Test
    void loadingAgainPicksUpNewFoldersAndKeepsLoadedModels() throws IOException {
        copy("iris-mlp", "a");
        try (ModelRepository repository = new ModelRepository(root, target)) {
            repository.load();
            InferenceModel first = repository.model("a").orElseThrow();
            copy("iris-mlp", "b");

            assertThat(repository.load()).extracting(ModelStatus::name).containsExactly("a", "b");
            assertThat(repository.model("a")).containsSame(first);
            assertThat(weights.outstandingBlocks()).isEqualTo(8);
        }
    }

    @Test
    void theShippedExampleModelsLoad() {
        try (ModelRepository repository = new ModelRepository(Path.of("models"), target)) {
            assertThat(repository.load()).containsExactly(
                    new ModelStatus("iris-mlp", "1", State.READY, ""),
                    new ModelStatus("tiny-bert", "1", State.READY, ""));
        }
    }

    @Test
    void unreadableRootFailsLoudly() {
        ModelRepository repository = new ModelRepository(root.resolve("nope"), target);
        assertThatThrownBy(repository::load).hasMessageContaining("nope").hasMessageContaining("cannot be listed");
    }
}
