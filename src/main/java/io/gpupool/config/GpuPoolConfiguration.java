package io.gpupool.config;

import io.gpupool.backend.ComputeBackend;
import io.gpupool.backend.ComputeDevice;
import io.gpupool.backend.cuda.CudaBackend;
import io.gpupool.backend.host.HostBackend;
import io.gpupool.kernels.TensorOps;
import io.gpupool.kernels.host.HostTensorOps;
import io.gpupool.memory.metric.AllocatorMode;
import io.gpupool.memory.ChunkSource;
import io.gpupool.memory.DeviceAllocator;
import io.gpupool.memory.MemoryAdmission;
import io.gpupool.memory.pool.DevicePool;
import io.gpupool.memory.bestfit.BestFitAllocator;
import io.gpupool.memory.trace.TracingAllocator;
import io.gpupool.model.InferenceModel;
import io.gpupool.model.PlannedMemory;
import io.gpupool.model.graph.DeviceGraphs;
import io.gpupool.model.graph.GraphLimits;
import io.gpupool.model.graph.ShapeBuckets;
import io.gpupool.serving.DeviceRuntime;
import io.gpupool.serving.DeviceWorker;
import io.gpupool.serving.InferenceHandler;
import io.gpupool.serving.DynamicBatcher;
import io.gpupool.serving.InferenceObserver;
import io.gpupool.serving.InferenceService;
import io.gpupool.serving.UndeliveredFailures;
import io.gpupool.serving.ModelRegistry;
import io.gpupool.serving.ModelConfigHandler;
import io.gpupool.serving.ModelSource;
import io.gpupool.serving.ProtocolExtensions;
import io.gpupool.serving.RepositoryHandler;
import io.gpupool.serving.RequestDecoder;
import io.gpupool.serving.ServingDevices;
import io.gpupool.serving.ServingRoutes;
import io.gpupool.serving.SharedMemoryHandler;
import io.gpupool.serving.StatisticsHandler;
import io.gpupool.serving.WarmUp;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.boot.context.properties.EnableConfigurationProperties;
import org.springframework.context.SmartLifecycle;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.web.reactive.function.server.RouterFunction;
import org.springframework.web.reactive.function.server.ServerResponse;
import tools.jackson.databind.json.JsonMapper;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * The one place that decides what runs: which backend ({@code gpupool.backend}), and per device which
 * allocator ({@code gpupool.memory.mode}), which kernels, how many streams, and which models.
 *
 * <pre>
 *   backend ── auto/cuda: CudaBackend.tryCreate(options)  (auto falls back to host); options carry
 *            │            gpupool.memory.expandable-segments (ignored, logged, on the host)
 *            └ host:      HostBackend
 *   per device:
 *     chunks       device.chunkSource(), wrapped by FaultInjection when
 *                  gpupool.memory.fault-injection.probability > 0 (testing only; armed after warm-up)
 *     activations  TWO_LEVEL/GLOBAL_ONLY: DevicePool(device.chunkSource())
 *                  BEST_FIT:              BestFitAllocator(device.chunkSource())
 *                  DIRECT/CUDA_ASYNC:     device.nativeAllocator(mode)
 *                  each behind a TracingAllocator (trace recording switched on and off at runtime)
 *     weights      device.nativeAllocator(DIRECT), else a GLOBAL_ONLY DevicePool of its own
 *     kernels      CudaTensorOps(gpupool.kernels.precision, .gemm-engine: cuBLASLt or own kernels, workspaces
 *                  from the activation pool; KernelSelection) on CUDA, HostTensorOps on the host; then any
 *                  TensorOpsCustomizer beans (none shipped)
 *     streams      DeviceWorker: streams-per-device streams, queue-capacity waiting requests, behind the
 *                  pool's MemoryAdmission (gpupool.memory.admission.enabled; pool modes only); the kernels'
 *                  stream workspaces go back to the pool after gpupool.kernels.workspace-release-after-idle
 *                  (IdleWorkspaceRelease) and on a trim
 *   graphs         DeviceGraphs per CUDA device (gpupool.kernels.graphs.*), none on the host; the
 *                  repository's models are served behind them
 *   models         every ModelSource bean (the repository at gpupool.models.path, plus any others)
 *   warm-up        after start, on its own thread; /v2/health/ready answers 200 once it finished
 * </pre>
 */
@Configuration(proxyBeanMethods = false)
@EnableConfigurationProperties({GpuPoolProperties.class, KernelProperties.class, ServerLimitsProperties.class,
        GraphProperties.class})
public class GpuPoolConfiguration {

    private static final Logger log = LoggerFactory.getLogger(GpuPoolConfiguration.class);

    /**
     * Most events one allocation-trace recording keeps (operators start and stop it on
     * {@code /actuator/gpupool/{device}/trace}); while not recording the decorator costs one volatile read.
     */
    static final int TRACE_CAPACITY = 1_000_000;

    @Bean
    GpuPoolSettings gpuPoolSettings(GpuPoolProperties properties) {
        return properties.toSettings();
    }

    @Bean(destroyMethod = "close")
    ComputeBackend computeBackend(GpuPoolSettings settings) {
        boolean expandable = settings.memory().expandableSegments();
        CudaBackend.Options cudaOptions = CudaBackend.Options.defaults().withExpandableSegments(expandable);
        ComputeBackend backend = switch (settings.backend()) {
            case HOST -> new HostBackend();
            case CUDA -> CudaBackend.tryCreate(cudaOptions).orElseThrow(() -> new IllegalStateException(
                    "gpupool.backend=cuda but no CUDA driver or device was found; use auto or host"));
            case AUTO -> CudaBackend.tryCreate(cudaOptions).<ComputeBackend>map(cuda -> cuda).orElseGet(HostBackend::new);
        };
        if (expandable && !(backend instanceof CudaBackend)) {
            log.info("gpupool.memory.expandable-segments=true is ignored: the {} backend has no virtual memory mapping",
                    backend.name());
        }
        log.info("Backend {} with {} device(s): {}", backend.name(), backend.devices().size(),
                backend.devices().stream().map(ComputeDevice::name).toList());
        return backend;
    }

    @Bean
    FaultInjection faultInjection(GpuPoolSettings settings) {
        return new FaultInjection(settings.memory().faultProbability(), settings.memory().faultSeed());
    }

    @Bean(destroyMethod = "close")
    ServingDevices servingDevices(ComputeBackend backend, GpuPoolSettings settings, FaultInjection faults,
                                  KernelProperties kernels, ObjectProvider<TensorOpsCustomizer> customizers) {
        List<DeviceRuntime> runtimes = new ArrayList<>();
        for (ComputeDevice device : backend.devices()) {
            DeviceAllocator activations = new TracingAllocator(
                    activationAllocator(device, settings.memory(), faults.chunksOf(device)), TRACE_CAPACITY);
            TensorOps ops = backend instanceof CudaBackend ? KernelSelection.cudaOps(device, kernels, activations)
                    : new HostTensorOps();
            for (TensorOpsCustomizer customizer : customizers.orderedStream().toList()) {
                ops = customizer.customize(device, ops, activations);
            }
            DeviceAllocator weights = device.nativeAllocator(AllocatorMode.DIRECT)
                    .orElseGet(() -> new DevicePool(device.chunkSource(),
                            settings.memory().pool().withMode(AllocatorMode.GLOBAL_ONLY)));
            TensorOps kernelOps = ops;
            // An idle moment may see the stream workspaces given back; the next products take them again.
            long workspacesAtMost = (long) settings.serving().streamsPerDevice() * kernelOps.workspaceBound();
            DeviceWorker worker = new DeviceWorker(device, activations, ops, settings.serving().streamsPerDevice(),
                    settings.serving().queueCapacity(), admission(device.chunkSource().name(),
                    device.chunkSource().capacityBytes(), activations, settings.memory().admission(),
                    () -> workspacesAtMost, settings.serving().requestArena()));
            runtimes.add(new DeviceRuntime(device, activations, weights, ops, worker));
            log.info("Device {} ({}): {} allocator, {} streams, queue of {}", device.index(), device.name(),
                    activations.mode(), settings.serving().streamsPerDevice(), settings.serving().queueCapacity());
        }
        return new ServingDevices(runtimes);
    }

    /**
     * Calls {@code maintain()} on every device pool every {@code gpupool.memory.maintenance-interval} (a daemon
     * thread, stopped before the devices close: this bean depends on them).
     */
    @Bean(destroyMethod = "close")
    PoolMaintenance poolMaintenance(ServingDevices devices, GpuPoolProperties properties) {
        return new PoolMaintenance(PoolMaintenance.poolsOf(devices.devices()),
                PoolMaintenance.interval(properties.getMemory().getMaintenanceInterval()));
    }

    /**
     * Gives idle devices' stream workspaces back to their pools after
     * {@code gpupool.kernels.workspace-release-after-idle} (nothing runs while it is 0); stopped before the
     * devices close.
     */
    @Bean(destroyMethod = "close")
    IdleWorkspaceRelease idleWorkspaceRelease(ServingDevices devices, KernelProperties kernels) {
        return new IdleWorkspaceRelease(devices.devices().stream().map(DeviceRuntime::worker).toList(),
                kernels.getWorkspaceReleaseAfterIdle());
    }

    /**
     * The memory admission in front of a device's activation pool ({@code gpupool.memory.admission.enabled}):
     * the cap in force, the pool's bytes in use (allocated less what its local caches hold) and its block
     * rounding. Allocators without a pool cap (BEST_FIT, DIRECT, CUDA_ASYNC) get one that admits everything
     * at once.
     *
     * @param name          the device's memory, for messages (e.g. {@code cuda:0})
     * @param capacityBytes what a fractional cap applies to
     */
    public static MemoryAdmission admission(String name, long capacityBytes, DeviceAllocator activations,
                                            boolean enabled) {
        return admission(name, capacityBytes, activations, enabled, () -> 0, false);
    }

    /**
     * @param residentFloor pool bytes that belong to no request and may be held at any moment although an idle
     *                      moment saw them given back (the kernels' stream workspaces, at most)
     * @param arenas        the models run each forward in one arena ({@code gpupool.serving.request-arena}): a
     *                      charge is rounded as the pool rounds an arena ({@link DevicePool#arenaBlockBytes})
     */
    public static MemoryAdmission admission(String name, long capacityBytes, DeviceAllocator activations,
                                            boolean enabled, java.util.function.LongSupplier residentFloor,
                                            boolean arenas) {
        DevicePool pool = activations.capability(DevicePool.class).orElse(null);
        if (pool == null) {
            return MemoryAdmission.unbounded(name);
        }
        return new MemoryAdmission(name, enabled, () -> pool.config().effectiveCapBytes(capacityBytes),
                () -> pool.metrics().allocatedBytes() - pool.metrics().cachedBytes(),
                arenas ? pool::arenaBlockBytes : pool::blockBytes, residentFloor);
    }

    /** The activation allocator of {@code device} for the configured mode. */
    static DeviceAllocator activationAllocator(ComputeDevice device, MemorySettings memory, ChunkSource chunks) {
        return switch (memory.mode()) {
            case TWO_LEVEL, GLOBAL_ONLY -> new DevicePool(chunks, memory.pool());
            case BEST_FIT -> new BestFitAllocator(chunks, BestFitAllocator.DEFAULT_CHUNK_BYTES,
                    memory.pool().trackAllocationSites());
            case DIRECT, CUDA_ASYNC -> device.nativeAllocator(memory.mode()).orElseThrow(() ->
                    new IllegalStateException("gpupool.memory.mode=" + memory.mode() + " is not offered by device "
                            + device.index() + " (" + device.name() + ")"));
        };
    }

    /**
     * CUDA graphs per device ({@code gpupool.kernels.graphs.*}); devices without graphs (the host) get
     * none. Their two streams take the ordinals after the request streams and the loading stream.
     */
    @Bean(destroyMethod = "close")
    DeviceGraphSet deviceGraphs(ServingDevices devices, GraphProperties properties, GpuPoolSettings settings) {
        GraphLimits limits = properties.toLimits();
        ShapeBuckets buckets = properties.toBuckets();
        int firstOrdinal = settings.serving().streamsPerDevice() + 1;
        Map<Integer, DeviceGraphs> byDevice = new TreeMap<>();
        try {
            for (DeviceRuntime device : devices.devices()) {
                DeviceGraphs.open(device.device(), device.allocator(), limits, buckets, firstOrdinal).ifPresent(graphs -> {
                    byDevice.put(device.index(), graphs);
                    log.info("Device {}: CUDA graphs {} (at most {} graphs, {} bytes; buckets {})", device.index(),
                            limits.enabled() ? "on" : "off", limits.maxCount(), limits.maxBytes(), buckets);
                });
            }
        } catch (RuntimeException e) {
            new DeviceGraphSet(byDevice).close();
            throw e;
        }
        return new DeviceGraphSet(byDevice);
    }

    @Bean
    ModelSource repositoryModelSource(GpuPoolSettings settings, DeviceGraphSet graphs) {
        return new RepositoryModelSource(settings.models().path(), settings.serving().streamsPerDevice(), graphs,
                settings.serving().requestArena());
    }

    @Bean(destroyMethod = "close")
    ModelRegistry modelRegistry(ObjectProvider<ModelSource> sources, ServingDevices devices) {
        List<ModelSource.Loaded> loaded = new ArrayList<>();
        sources.orderedStream().forEach(source -> loaded.add(source.load(devices.devices())));
        ModelRegistry registry = ModelRegistry.of(loaded);
        log.info("Serving models {}; not served: {}", registry.models().stream().map(m -> m.name()).toList(),
                registry.failures());
        return registry;
    }

    @Bean
    RequestDecoder requestDecoder(JsonMapper json, GpuPoolSettings settings) {
        ServingSettings serving = settings.serving();
        return new RequestDecoder(json, serving.maxBatchSize(), serving.maxSequenceLength(), serving.defaultTimeout());
    }

    @Bean
    InferenceService inferenceService(ServingDevices devices, JsonMapper json,
                                      ObjectProvider<InferenceObserver> observer, ObjectProvider<DynamicBatcher> batcher) {
        UndeliveredFailures.install(); // failures raised after their client left: logged by what they are, not as ERROR
        return new InferenceService(devices.devices(), json, observer.getIfAvailable(() -> InferenceObserver.NONE),
                batcher.getIfAvailable());
    }

    @Bean
    InferenceHandler inferenceHandler(ModelRegistry registry, RequestDecoder decoder, InferenceService service,
                                      JsonMapper json, GpuPoolSettings settings,
                                      ObjectProvider<InferenceObserver> observer, ServerLimitsProperties limits) {
        String version = GpuPoolConfiguration.class.getPackage().getImplementationVersion();
        return new InferenceHandler(registry, decoder, service, json, version == null ? "dev" : version,
                settings.serving().maxBodyBytes(), observer.getIfAvailable(() -> InferenceObserver.NONE),
                HttpServerLimits.decodingBudget(limits, settings.serving().maxBodyBytes()));
    }

    /**
     * Triton's extensions: statistics, model configuration, shared memory (answered as unsupported),
     * and the model repository's load/unload (off unless gpupool.models.control=explicit).
     */
    @Bean
    ProtocolExtensions protocolExtensions(ModelRegistry registry, GpuPoolSettings settings, ComputeBackend backend,
                                          RepositoryModelSource repository, ServingDevices devices, WarmUp warmUp,
                                          JsonMapper json, ObjectProvider<ModelLoadListener> listeners,
                                          ObjectProvider<DynamicBatcher> batcher) {
        boolean gpu = backend instanceof CudaBackend;
        DynamicBatcher batching = batcher.getIfAvailable();
        RepositoryHandler control = new RepositoryHandler(registry, repository.loader(devices.devices()),
                warmUp::dryRun, name -> listeners.orderedStream().forEach(listener -> listener.loaded(name)),
                settings.models().control() == ModelsSettings.Control.EXPLICIT, json,
                settings.serving().maxBodyBytes());
        return new ProtocolExtensions(new StatisticsHandler(registry, gpu ? "GPU" : "CPU"),
                new ModelConfigHandler(registry, settings.serving().maxBatchSize(),
                        settings.serving().streamsPerDevice(), gpu ? "KIND_GPU" : "KIND_CPU",
                        model -> batching == null ? null : batching.tritonSection(model)),
                new SharedMemoryHandler(settings.serving().maxBodyBytes()), control);
    }

    /** Told the name of each model that starts serving after start-up (the meters add it). */
    @FunctionalInterface
    public interface ModelLoadListener {
        void loaded(String model);
    }

    @Bean
    RouterFunction<ServerResponse> inferenceRoutes(InferenceHandler handler, ProtocolExtensions extensions) {
        return ServingRoutes.routes(handler, extensions);
    }

    @Bean
    WarmUp warmUp(ModelRegistry registry, ServingDevices devices, GpuPoolSettings settings, KernelProperties kernels,
                  GraphProperties graphs) {
        ServingSettings serving = settings.serving();
        return new WarmUp(registry, devices.devices(), serving.maxBatchSize(), serving.maxSequenceLength(),
                new PlannedPoolSizing(), warmUpShapes(kernels, graphs));
    }

    /**
     * With GEMM tuning, the graph buckets' shapes (batch buckets × sequence buckets): the short shapes requests are
     * rounded to when graphs are on, and the commonest without; the dry runs there measure their GEMM shapes before
     * the first request. None without tuning.
     */
    static List<WarmUp.Shape> warmUpShapes(KernelProperties kernels, GraphProperties graphs) {
        if (!kernels.isGemmTuning()) {
            return List.of();
        }
        List<WarmUp.Shape> shapes = new ArrayList<>();
        for (int batch : graphs.getBatchBuckets()) {
            for (int sequence : graphs.getSequenceBuckets()) {
                shapes.add(new WarmUp.Shape(batch, sequence));
            }
        }
        return shapes;
    }

    @Bean
    WarmUpLifecycle warmUpLifecycle(WarmUp warmUp, GpuPoolSettings settings, FaultInjection faults) {
        return new WarmUpLifecycle(warmUp, settings.serving().warmUp(), faults::arm);
    }

    /** Sizes from the models' liveness plans; reserves in a {@link DevicePool}, the only allocator with a reserve. */
    static final class PlannedPoolSizing implements WarmUp.PoolSizing {

        @Override
        public long largestTensorBytes(InferenceModel model, int batch, int sequence) {
            return model instanceof PlannedMemory planned ? planned.largestActivationBytes(batch, sequence) : 0;
        }

        @Override
        public long reserve(DeviceRuntime device, long bytes) {
            return device.allocator().capability(DevicePool.class).map(pool -> pool.reserve(bytes)).orElse(0L);
        }
    }

    /** Runs the warm-up on its own thread once the context has started, so liveness answers meanwhile. */
    static final class WarmUpLifecycle implements SmartLifecycle {

        private final WarmUp warmUp;
        private final boolean enabled;
        /** Runs once the warm-up finished or was skipped (arms fault injection). */
        private final Runnable afterWarmUp;
        private volatile boolean running;

        WarmUpLifecycle(WarmUp warmUp, boolean enabled, Runnable afterWarmUp) {
            this.warmUp = warmUp;
            this.enabled = enabled;
            this.afterWarmUp = afterWarmUp;
        }

        @Override
        public void start() {
            running = true;
            if (!enabled) {
                warmUp.skip();
                afterWarmUp.run();
                return;
            }
            Thread.ofPlatform().name("gpupool-warm-up").daemon(true).start(() -> {
                try {
                    warmUp.run();
                } catch (RuntimeException e) {
                    log.error("Warm-up failed", e);
                } finally {
                    afterWarmUp.run();
                }
            });
        }

        @Override
        public void stop() {
            running = false;
        }

        @Override
        public boolean isRunning() {
            return running;
        }
    }
}
