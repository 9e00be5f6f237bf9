package io.gpupool.serving;

import io.gpupool.model.DataType;
import io.gpupool.model.HostTensor;
import io.gpupool.model.TensorSpec;
import io.gpupool.serving.fake.CountingAllocator;
import io.gpupool.serving.fake.FakeDevice;
import io.gpupool.serving.fake.PlannedTestModel;
import io.gpupool.serving.fake.TestModel;
import org.springframework.test.web.reactive.server.WebTestClient;
import tools.jackson.databind.DeserializationFeature;
import tools.jackson.databind.json.JsonMapper;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * The serving stack over fake devices and test models, without Spring: what the configuration
 * wires, built by hand so each test chooses streams, queue, limits and timeouts.
 *
 * <p>Models: {@code doubler} (x FP32 [-1,4] -> y = 2x, argmax INT64 [-1]; max batch 8),
 * {@code echo} (one input per datatype, echoed as {@code <name>_out}), {@code tokens}
 * (ids INT64 [-1,-1] -> length INT64 [-1]; max batch 4, max sequence 16).
 */
final class ServingFixture implements AutoCloseable {

    static final JsonMapper JSON = JsonMapper.builder()
            .disable(DeserializationFeature.FAIL_ON_UNKNOWN_PROPERTIES).build();

    final List<FakeDevice> devices = new ArrayList<>();
    final List<CountingAllocator> allocators = new ArrayList<>();
    final List<io.gpupool.memory.pool.DevicePool> pools = new ArrayList<>();
    final List<DeviceRuntime> runtimes = new ArrayList<>();
    final Map<String, Map<Integer, TestModel>> models = new HashMap<>();
    /** Replicas of model {@code planned} by device, when the builder asked for it. */
    final Map<Integer, PlannedTestModel> planned = new HashMap<>();
    final ModelRegistry registry;
    /** Names the repository extension reported as loaded. */
    final List<String> loadedModels = new java.util.concurrent.CopyOnWriteArrayList<>();
    final InferenceService service;
    /** Null unless the builder asked for batching. */
    final DynamicBatcher batcher;
    final WebTestClient client;
    final org.springframework.web.reactive.function.server.RouterFunction<?> routes;

    static Builder builder() {
        return new Builder();
    }

    static final class Builder {
        int deviceCount = 1;
        int streams = 2;
        int queue = 8;
        long memoryLimit = 1L << 30;
        int maxBody = 1 << 20;
        Duration timeout = Duration.ofSeconds(10);
        boolean warmUp = true;
        List<ModelFailure> failures = List.of();

        Builder devices(int n) { deviceCount = n; return this; }
        Builder streams(int n) { streams = n; return this; }
        Builder queue(int n) { queue = n; return this; }
        Builder memoryLimit(long bytes) { memoryLimit = bytes; return this; }
        Builder maxBody(int bytes) { maxBody = bytes; return this; }
        Builder timeout(Duration d) { timeout = d; return this; }
        Builder noWarmUp() { warmUp = false; return this; }
        Builder failures(List<ModelFailure> f) { failures = f; return this; }
        boolean modelControl;
        /** gpupool.models.control=explicit: load and unload requests are served. */
        Builder modelControl() { modelControl = true; return this; }
        long poolCap = -1;
        InferenceObserver observer = InferenceObserver.NONE;
        Builder observer(InferenceObserver o) { observer = o; return this; }
        DecodingBudget decodingBudget = new DecodingBudget(1L << 30);
        Builder decodingBudget(DecodingBudget budget) { decodingBudget = budget; return this; }
        /** Use the real two-level pool over host memory, capped at {@code bytes}, instead of the counting fake. */
        Builder realPool(long capBytes) { poolCap = capBytes; return this; }
        boolean admission;
        /** With {@link #realPool}: requests reserve their planned peak under the cap before they run, as served. */
        Builder admission() { admission = true; return this; }
        long plannedBlockBytes;
        /** Adds model {@code planned}: a {@link PlannedTestModel} of {@code bytes} per row (max batch 8). */
        Builder planned(long bytes) { plannedBlockBytes = bytes; return this; }
        boolean batching;
        /** Every model that can batch does (no delay), its batches split against the admission's room. */
        Builder batching() { batching = true; return this; }

        ServingFixture build() {
            return new ServingFixture(this);
        }
    }

    private ServingFixture(Builder b) {
        for (int i = 0; i < b.deviceCount; i++) {
            FakeDevice device = new FakeDevice(i);
            CountingAllocator counting = new CountingAllocator(b.memoryLimit);
            io.gpupool.memory.DeviceAllocator allocator = counting;
            if (b.poolCap > 0) {
                long mib = io.gpupool.memory.PoolConfig.MIB;
                allocator = new io.gpupool.memory.pool.DevicePool(
                        new io.gpupool.backend.host.HostBackend(b.poolCap * 4).devices().getFirst().chunkSource(),
                        new io.gpupool.memory.PoolConfig(io.gpupool.memory.metric.AllocatorMode.TWO_LEVEL, 2 * mib, 2 * mib,
                                io.gpupool.memory.GrowthPolicy.LAZY, 0, 2 * mib, 2 * mib, b.poolCap, 0.9, 256 * mib,
                                16, Duration.ofSeconds(10), 10, 0, Duration.ofSeconds(30), io.gpupool.memory.PoolConfig.DEFAULT_MAPPED_SLACK, 0, 2 * mib, false,
                                io.gpupool.memory.BudgetReclaim.ON_MAP, io.gpupool.memory.ReclaimOrder.HIGHEST_ADDRESS, io.gpupool.memory.PoolConfig.DEFAULT_RECLAIM_HYSTERESIS, false, false));
                pools.add((io.gpupool.memory.pool.DevicePool) allocator);
            }
            devices.add(device);
            allocators.add(counting);
            DeviceWorker worker = b.admission && b.poolCap > 0
                    ? new DeviceWorker(device, allocator, null, b.streams, b.queue,
                            io.gpupool.config.GpuPoolConfiguration.admission("host", b.poolCap * 4, allocator, true))
                    : new DeviceWorker(device, allocator, null, b.streams, b.queue);
            runtimes.add(new DeviceRuntime(device, allocator, allocator, null, worker));
        }
        List<ServedModel> served = new ArrayList<>();
        served.add(serve("doubler", () -> new TestModel("doubler", 8, 0,
                List.of(new TensorSpec("x", DataType.FP32, new long[]{-1, 4})),
                List.of(new TensorSpec("y", DataType.FP32, new long[]{-1, 4}),
                        new TensorSpec("argmax", DataType.INT64, new long[]{-1})),
                ServingFixture::doubler)));
        List<TensorSpec> echoInputs = new ArrayList<>();
        List<TensorSpec> echoOutputs = new ArrayList<>();
        for (DataType type : List.of(DataType.FP32, DataType.FP16, DataType.BF16, DataType.INT64, DataType.INT32,
                DataType.BOOL, DataType.BYTES)) {
            echoInputs.add(new TensorSpec(type.name().toLowerCase(), type, new long[]{-1}));
            echoOutputs.add(new TensorSpec(type.name().toLowerCase() + "_out", type, new long[]{-1}));
        }
        served.add(serve("echo", () -> new TestModel("echo", 1000, 0, echoInputs, echoOutputs,
                in -> in.stream().map(t -> new HostTensor(t.name() + "_out", t.dataType(), t.shape(),
                        copy(t.data()))).toList())));
        served.add(serve("tokens", () -> new TestModel("tokens", 4, 16,
                List.of(new TensorSpec("ids", DataType.INT64, new long[]{-1, -1})),
                List.of(new TensorSpec("length", DataType.INT64, new long[]{-1})),
                in -> {
                    long[] shape = in.getFirst().shape();
                    MemorySegment out = MemorySegment.ofArray(new long[(int) shape[0]]);
                    for (int i = 0; i < shape[0]; i++) {
                        out.setAtIndex(ValueLayout.JAVA_LONG, i, shape[1]);
                    }
                    return List.of(new HostTensor("length", DataType.INT64, new long[]{shape[0]}, out));
                })));
        if (b.plannedBlockBytes > 0) {
            Map<Integer, PlannedTestModel> replicas = new HashMap<>();
            for (FakeDevice device : devices) {
                replicas.put(device.index(), new PlannedTestModel("planned", 8, b.plannedBlockBytes));
            }
            planned.putAll(replicas);
            served.add(new ServedModel(new HashMap<Integer, io.gpupool.model.InferenceModel>(replicas)));
        }
        registry = new ModelRegistry(served, b.failures);
        WarmUp warmUp = new WarmUp(registry, runtimes, 64, 512);
        if (b.warmUp) {
            warmUp.run();
            models.values().forEach(m -> m.values().forEach(t -> t.invocations.set(0)));
        }
        if (b.batching) {
            Map<Integer, java.util.function.LongSupplier> room = new HashMap<>();
            runtimes.forEach(r -> room.put(r.index(), r.worker().admission()::availableBytes));
            batcher = new DynamicBatcher(runtimes, new BatchPolicy.Defaults(true, Duration.ZERO, 32, 8192, List.of()),
                    b.queue, room, new BatchStatistics());
        } else {
            batcher = null;
        }
        service = new InferenceService(runtimes, JSON, b.observer, batcher);
        RequestDecoder decoder = new RequestDecoder(JSON, 64, 512, b.timeout);
        InferenceHandler handler = new InferenceHandler(registry, decoder, service, JSON, "test", b.maxBody, b.observer,
                b.decodingBudget);
        RepositoryHandler repository = new RepositoryHandler(registry, this::loadFolder, warmUp::dryRun,
                loadedModels::add, b.modelControl, JSON, b.maxBody);
        ProtocolExtensions extensions = new ProtocolExtensions(new StatisticsHandler(registry, "CPU"),
                new ModelConfigHandler(registry, 64, b.streams, "KIND_CPU", model -> null), new SharedMemoryHandler(b.maxBody),
                repository);
        routes = ServingRoutes.routes(handler, extensions);
        client = WebTestClient.bindToRouterFunction(routes).build();
    }

    /**
     * The fixture's repository for load requests: folder {@code late} (a doubler), {@code doubler}
     * (reloads it), {@code unfit} (loads, fails its warm-up); any other name has no folder.
     */
    private ServedModel loadFolder(String name) {
        return switch (name) {
            case "late", "doubler" -> serve(name, () -> new TestModel(name, 8, 0,
                    List.of(new TensorSpec("x", DataType.FP32, new long[]{-1, 4})),
                    List.of(new TensorSpec("y", DataType.FP32, new long[]{-1, 4}),
                            new TensorSpec("argmax", DataType.INT64, new long[]{-1})),
                    ServingFixture::doubler));
            case "unfit" -> serve(name, () -> new TestModel(name, 8, 0,
                    List.of(new TensorSpec("x", DataType.FP32, new long[]{-1, 4})),
                    List.of(new TensorSpec("y", DataType.FP32, new long[]{-1, 4})),
                    in -> { throw new IllegalStateException("kernel missing"); }));
            case "broken" -> throw ServingException.badRequest("model 'broken' failed to load: config.json: not valid JSON");
            default -> throw ServingException.notFound("no model folder '" + name + "' in the model repository");
        };
    }

    private ServedModel serve(String name, java.util.function.Supplier<TestModel> factory) {
        Map<Integer, TestModel> replicas = new HashMap<>();
        for (FakeDevice device : devices) {
            replicas.put(device.index(), factory.get());
        }
        models.put(name, replicas);
        return new ServedModel(new HashMap<>(replicas));
    }

    /** A fresh copy of a model of the fixture's repository ({@link #loadFolder}), not yet served. */
    ServedModel reloaded(String name) {
        return loadFolder(name);
    }

    TestModel model(String name) {
        return models.get(name).get(0);
    }

    long allocatedBytes() {
        return allocators.stream().mapToLong(a -> a.allocatedBytes.get()).sum()
                + pools.stream().mapToLong(p -> p.metrics().allocatedBytes()).sum();
    }

    static List<HostTensor> doubler(List<HostTensor> inputs) {
        HostTensor x = inputs.getFirst();
        int rows = (int) x.shape()[0];
        float[] y = new float[rows * 4];
        long[] argmax = new long[rows];
        for (int r = 0; r < rows; r++) {
            int best = 0;
            for (int c = 0; c < 4; c++) {
                float v = x.data().getAtIndex(ValueLayout.JAVA_FLOAT_UNALIGNED, r * 4L + c);
                y[r * 4 + c] = 2 * v;
                if (v > x.data().getAtIndex(ValueLayout.JAVA_FLOAT_UNALIGNED, r * 4L + best)) {
                    best = c;
                }
            }
            argmax[r] = best;
        }
        return List.of(new HostTensor("y", DataType.FP32, new long[]{rows, 4}, MemorySegment.ofArray(y)),
                new HostTensor("argmax", DataType.INT64, new long[]{rows}, MemorySegment.ofArray(argmax)));
    }

    private static MemorySegment copy(MemorySegment data) {
        return MemorySegment.ofArray(data.toArray(ValueLayout.JAVA_BYTE));
    }

    @Override
    public void close() {
        if (batcher != null) {
            batcher.close();
        }
        runtimes.forEach(r -> r.worker().close());
        pools.forEach(io.gpupool.memory.pool.DevicePool::close);
    }
}
