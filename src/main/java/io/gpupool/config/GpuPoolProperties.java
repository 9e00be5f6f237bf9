package io.gpupool.config;

import io.gpupool.memory.metric.AllocatorMode;
import io.gpupool.memory.PoolConfig;
import io.gpupool.memory.ReclaimOrder;
import io.gpupool.memory.BudgetReclaim;
import io.gpupool.memory.GrowthPolicy;
import org.springframework.boot.context.properties.ConfigurationProperties;
import org.springframework.util.unit.DataSize;

import java.nio.file.Path;
import java.time.Duration;

/**
 * Every {@code gpupool.*} setting, as bound from the environment. Validated once, by
 * {@link #toSettings()}, into immutable records; nothing reads these beans afterwards.
 */
@ConfigurationProperties("gpupool")
public class GpuPoolProperties {

    /** Which compute backend runs the models: auto (CUDA when a driver and a device are found, else host), cuda (fail without one), host. */
    private Backend backend = Backend.AUTO;

    private final Memory memory = new Memory();

    private final Serving serving = new Serving();

    private final Models models = new Models();

    /** Choice of {@code gpupool.backend}. */
    public enum Backend { AUTO, CUDA, HOST }

    public Backend getBackend() {
        return backend;
    }

    public void setBackend(Backend backend) {
        this.backend = backend;
    }

    public Memory getMemory() {
        return memory;
    }

    public Serving getServing() {
        return serving;
    }

    public Models getModels() {
        return models;
    }

    /** Validates everything and returns the settings the application runs with. */
    public GpuPoolSettings toSettings() {
        return new GpuPoolSettings(backend, memory.toSettings(), serving.toSettings(), models.toSettings());
    }

    /** {@code gpupool.memory.*}: the activation pool of each device. */
    public static class Memory {

        /** Allocation strategy: TWO_LEVEL (stream-local caches over the global buddy pool), GLOBAL_ONLY, BEST_FIT, DIRECT (one device allocation per request), CUDA_ASYNC (the driver's stream-ordered allocator, CUDA only). */
        private AllocatorMode mode = AllocatorMode.TWO_LEVEL;

        /** Smallest buddy block; a power of two from 2MB to 64MB. Smaller requests share blocks through size classes. */
        private DataSize minBlockBytes = DataSize.ofMegabytes(2);

        /** Largest buddy block; a power of two up to 4GB. Larger requests get a dedicated chunk of their own size (2MB granule). */
        private DataSize maxBlockBytes = DataSize.ofMegabytes(256);

        /** How the pool grows: MAPPED (default: address-space chunks, memory mapped under blocks in use, free mapped memory beyond the allocated high-water mark + 1/16 unmapped; ON_DEMAND where the device cannot map, e.g. a host backend that is not Linux), ON_DEMAND (optional initial size, then flush caches, coalesce, return empty chunks and grow by what a miss needs), EAGER (reserve the initial size, never grow), LAZY (grow in chunks doubling from growth-step-bytes), HYBRID (initial size, then LAZY). */
        private GrowthPolicy growthPolicy = GrowthPolicy.MAPPED;

        /** Bytes reserved at start for EAGER and HYBRID; must be empty for LAZY. Independently of this, warm-up reserves 1.5 x the largest tensor of the served models. */
        private DataSize initialBytes;

        /** Size of the first chunk grown on demand; later chunks double up to max-growth-step-bytes. */
        private DataSize growthStepBytes = DataSize.ofMegabytes(256);

        /** Largest chunk grown on demand. */
        private DataSize maxGrowthStepBytes = DataSize.ofGigabytes(1);

        /** Most bytes the pool reserves from the device; when empty, cap-fraction of the device memory applies. */
        private DataSize capBytes;

        /** The cap as a fraction of device memory, in (0, 1], used when cap-bytes is empty. */
        private double capFraction = 0.9;

        /** Most bytes one stream's local cache holds (TWO_LEVEL); MAPPED and ON_DEMAND growth lower it to a share of the allocated bytes. */
        private DataSize localCacheBytesPerStream = DataSize.ofMegabytes(256);

        /** Most free blocks one stream caches per size class, 0 to 64. */
        private int localCacheCountPerClass = 16;

        /** A stream's size class left unused this long is flushed to the global level. */
        private Duration localIdleAge = Duration.ofSeconds(10);

        /** Free blocks of one order merge with their buddies once the order holds more than this many. */
        private int coalesceThreshold = 10;

        /** Reserved bytes kept even when idle; empty chunks above it go back to the device. */
        private DataSize releaseThresholdBytes = DataSize.ofBytes(0);

        /** How long a chunk must stay empty before it goes back to the device. */
        private Duration releaseIdleAge = Duration.ofSeconds(30);

        /**
         * How often each device pool's maintenance runs (idle flushes, returns, PERIODIC's reclaim for the
         * budget, lazy fences of idle streams recorded); 10ms to 1m.
         */
        private Duration maintenanceInterval = Duration.ofSeconds(1);

        /**
         * MAPPED growth: free mapped memory kept beyond the high-water mark of allocated bytes, as a
         * fraction of that mark, in [0, 1]; more is unmapped.
         */
        private double mappedSlack = PoolConfig.DEFAULT_MAPPED_SLACK;

        /**
         * MAPPED growth: physical memory unmapped but kept to map again elsewhere (no driver create and
         * release when the pool shrinks and grows again); counts as reserved, obeys the cap; 0 = off.
         */
        private DataSize retainedHandleBytes = DataSize.ofBytes(0);

        /**
         * MAPPED growth: the size of each physical allocation under runs below 64 MiB (the driver charges a
         * map and an unmap per allocation); a power of two from the minimum block to 16 MiB (and at most the
         * largest block). Unset: 8 MiB brought into that range.
         */
        private DataSize mappedExtentBytes;

        /**
         * MAPPED growth: rather than map beyond the budget (high-water mark + mapped slack), take memory
         * another stream freed and wait for that stream's work (as cudaMallocAsync does). Less memory,
         * more cross-stream waits. On by default in the server, beside the ON_MAP budget reclaim (the
         * pool's own default, {@code PoolConfig.defaults()}, keeps it off).
         */
        private boolean waitBeyondBudget = true;

        /**
         * MAPPED growth: which free blocks a reclaim for the budget unmaps first: SMALL_CHUNKS_FIRST (the
         * default: the large chunks' free runs last), HIGHEST_ADDRESS or COLDEST_IN_ORDER (within one size).
         */
        private ReclaimOrder reclaimOrder = ReclaimOrder.SMALL_CHUNKS_FIRST;

        /**
         * MAPPED growth: where free mapped memory above the budget goes back: ON_MAP (the allocation that
         * would pass the budget unmaps first) or PERIODIC (the pool's maintenance unmaps; serving threads
         * map beyond the budget within the cap and make no unmap calls). ON_MAP by default: reserved memory
         * stays near the budget, where PERIODIC holds what a second of load left mapped.
         */
        private BudgetReclaim budgetReclaim = BudgetReclaim.ON_MAP;

        /**
         * MAPPED growth: a reclaim for the budget unmaps down to this fraction of the slack below the budget,
         * in [0, 1]; 0 stops at the budget.
         */
        private double reclaimHysteresis = PoolConfig.DEFAULT_RECLAIM_HYSTERESIS;

        /** Record a stack trace per block so that leaks are reported with their allocation site (slow). */
        private boolean trackAllocationSites = false;

        /**
         * A free into the global level records no fence; one is recorded on the freeing stream only when another
         * stream takes the memory before the freeing stream was synchronised (docs/benchmarks.md, "Lazy fences").
         */
        private boolean lazyFences = true;

        /** CUDA only: grow the pool inside one reserved virtual range (2MB granules mapped on demand) instead of separate cuMemAlloc chunks, so blocks of different growth steps can merge; ignored, with a log line, on the host backend. */
        private boolean expandableSegments = false;

        /** Testing only: make a share of chunk requests fail (see {@link FaultInjection}). */
        private final FaultInjection faultInjection = new FaultInjection();

        /** Requests reserve their planned peak under the pool's cap before they run (see {@link Admission}). */
        private final Admission admission = new Admission();

        MemorySettings toSettings() {
            return MemorySettings.of(this);
        }

        public AllocatorMode getMode() { return mode; }
        public void setMode(AllocatorMode mode) { this.mode = mode; }
        public DataSize getMinBlockBytes() { return minBlockBytes; }
        public void setMinBlockBytes(DataSize minBlockBytes) { this.minBlockBytes = minBlockBytes; }
        public DataSize getMaxBlockBytes() { return maxBlockBytes; }
        public void setMaxBlockBytes(DataSize maxBlockBytes) { this.maxBlockBytes = maxBlockBytes; }
        public GrowthPolicy getGrowthPolicy() { return growthPolicy; }
        public void setGrowthPolicy(GrowthPolicy growthPolicy) { this.growthPolicy = growthPolicy; }
        public DataSize getInitialBytes() { return initialBytes; }
        public void setInitialBytes(DataSize initialBytes) { this.initialBytes = initialBytes; }
        public DataSize getGrowthStepBytes() { return growthStepBytes; }
        public void setGrowthStepBytes(DataSize growthStepBytes) { this.growthStepBytes = growthStepBytes; }
        public DataSize getMaxGrowthStepBytes() { return maxGrowthStepBytes; }
        public void setMaxGrowthStepBytes(DataSize maxGrowthStepBytes) { this.maxGrowthStepBytes = maxGrowthStepBytes; }
        public DataSize getCapBytes() { return capBytes; }
        public void setCapBytes(DataSize capBytes) { this.capBytes = capBytes; }
        public double getCapFraction() { return capFraction; }
        public void setCapFraction(double capFraction) { this.capFraction = capFraction; }
        public DataSize getLocalCacheBytesPerStream() { return localCacheBytesPerStream; }
        public void setLocalCacheBytesPerStream(DataSize localCacheBytesPerStream) { this.localCacheBytesPerStream = localCacheBytesPerStream; }
        public int getLocalCacheCountPerClass() { return localCacheCountPerClass; }
        public void setLocalCacheCountPerClass(int n) { this.localCacheCountPerClass = n; }
        public Duration getLocalIdleAge() { return localIdleAge; }
        public void setLocalIdleAge(Duration localIdleAge) { this.localIdleAge = localIdleAge; }
        public int getCoalesceThreshold() { return coalesceThreshold; }
        public void setCoalesceThreshold(int coalesceThreshold) { this.coalesceThreshold = coalesceThreshold; }
        public DataSize getReleaseThresholdBytes() { return releaseThresholdBytes; }
        public void setReleaseThresholdBytes(DataSize releaseThresholdBytes) { this.releaseThresholdBytes = releaseThresholdBytes; }
        public Duration getReleaseIdleAge() { return releaseIdleAge; }
        public Duration getMaintenanceInterval() { return maintenanceInterval; }
        public void setMaintenanceInterval(Duration interval) { this.maintenanceInterval = interval; }
        public void setReleaseIdleAge(Duration releaseIdleAge) { this.releaseIdleAge = releaseIdleAge; }
        public boolean isWaitBeyondBudget() { return waitBeyondBudget; }
        public void setWaitBeyondBudget(boolean waitBeyondBudget) { this.waitBeyondBudget = waitBeyondBudget; }
        public BudgetReclaim getBudgetReclaim() { return budgetReclaim; }
        public void setBudgetReclaim(BudgetReclaim budgetReclaim) { this.budgetReclaim = budgetReclaim; }
        public ReclaimOrder getReclaimOrder() { return reclaimOrder; }
        public void setReclaimOrder(ReclaimOrder reclaimOrder) { this.reclaimOrder = reclaimOrder; }
        public double getReclaimHysteresis() { return reclaimHysteresis; }
        public void setReclaimHysteresis(double reclaimHysteresis) { this.reclaimHysteresis = reclaimHysteresis; }
        public double getMappedSlack() { return mappedSlack; }
        public DataSize getRetainedHandleBytes() { return retainedHandleBytes; }
        public void setRetainedHandleBytes(DataSize retainedHandleBytes) { this.retainedHandleBytes = retainedHandleBytes; }
        public DataSize getMappedExtentBytes() { return mappedExtentBytes; }
        public void setMappedExtentBytes(DataSize mappedExtentBytes) { this.mappedExtentBytes = mappedExtentBytes; }
        public void setMappedSlack(double mappedSlack) { this.mappedSlack = mappedSlack; }
        public boolean isTrackAllocationSites() { return trackAllocationSites; }
        public void setTrackAllocationSites(boolean track) { this.trackAllocationSites = track; }
        public boolean isLazyFences() { return lazyFences; }
        public void setLazyFences(boolean lazy) { this.lazyFences = lazy; }
        public boolean isExpandableSegments() { return expandableSegments; }
        public void setExpandableSegments(boolean expandableSegments) { this.expandableSegments = expandableSegments; }
        public FaultInjection getFaultInjection() { return faultInjection; }
        public Admission getAdmission() { return admission; }
    }

    /**
     * {@code gpupool.memory.admission.*}: before a forward runs, its planned activation peak (each tensor in
     * the pool's blocks) is reserved against the pool's cap less its resident memory; a request that does not
     * fit waits in arrival order, within its timeout, for running requests to finish, instead of running into
     * the cap and failing with 507. A request whose peak alone exceeds what the cap can ever give is answered
     * 507 at once. Applies to the pool modes (TWO_LEVEL, GLOBAL_ONLY).
     */
    public static class Admission {

        /** Whether requests wait for their memory; false: every request runs at once and the pool alone decides. */
        private boolean enabled = true;

        public boolean isEnabled() { return enabled; }
        public void setEnabled(boolean enabled) { this.enabled = enabled; }
    }

    /**
     * {@code gpupool.memory.fault-injection.*}: testing only. Makes a share of the pool's chunk requests
     * to the device fail with out-of-memory, to exercise recovery and the 507 path under load. Applies to
     * the pool modes (TWO_LEVEL, GLOBAL_ONLY, BEST_FIT); DIRECT and CUDA_ASYNC take no chunks.
     */
    public static class FaultInjection {

        /** Share of chunk requests refused, in [0, 1]; 0 (the default) turns fault injection off. */
        private double probability = 0.0;

        /** Seed of the draws, so that a single-threaded run fails the same calls again. */
        private long seed = 1;

        public double getProbability() { return probability; }
        public void setProbability(double probability) { this.probability = probability; }
        public long getSeed() { return seed; }
        public void setSeed(long seed) { this.seed = seed; }
    }

    /** {@code gpupool.serving.*}: streams, queues, limits and timeouts of the inference API. */
    public static class Serving {

        /** Streams per device, each with its own local pool cache; this many requests compute at once per device. */
        private int streamsPerDevice = 4;

        /** Requests that may wait for a stream, per device; one more is refused with 503 and Retry-After. */
        private int queueCapacity = 64;

        /** Time a request may take from arrival to answer unless its "timeout" parameter (microseconds) says otherwise; past it: 504. */
        private Duration defaultTimeout = Duration.ofSeconds(30);

        /** Largest request body accepted (JSON plus binary data); larger: 413. */
        private DataSize maxBodySize = DataSize.ofMegabytes(64);

        /** Largest batch accepted for any model (a model's own maximum can be lower); larger: 400. */
        private int maxBatchSize = 64;

        /** Longest sequence accepted for any model (a model's own maximum can be lower); longer: 400. */
        private int maxSequenceLength = 512;

        /** Run each model once at its largest size before reporting ready (sizes the pools, proves the models run). */
        private boolean warmUp = true;

        /**
         * Each forward takes one block (its arena) sized by the execution plan, its tensors at offsets packed from
         * their lifetimes, released once the stream has finished; false: one allocation per tensor.
         */
        private boolean requestArena = true;

        ServingSettings toSettings() {
            return new ServingSettings(streamsPerDevice, queueCapacity, defaultTimeout, maxBodySize, maxBatchSize,
                    maxSequenceLength, warmUp, requestArena);
        }

        public int getStreamsPerDevice() { return streamsPerDevice; }
        public void setStreamsPerDevice(int streamsPerDevice) { this.streamsPerDevice = streamsPerDevice; }
        public int getQueueCapacity() { return queueCapacity; }
        public void setQueueCapacity(int queueCapacity) { this.queueCapacity = queueCapacity; }
        public Duration getDefaultTimeout() { return defaultTimeout; }
        public void setDefaultTimeout(Duration defaultTimeout) { this.defaultTimeout = defaultTimeout; }
        public DataSize getMaxBodySize() { return maxBodySize; }
        public void setMaxBodySize(DataSize maxBodySize) { this.maxBodySize = maxBodySize; }
        public int getMaxBatchSize() { return maxBatchSize; }
        public void setMaxBatchSize(int maxBatchSize) { this.maxBatchSize = maxBatchSize; }
        public int getMaxSequenceLength() { return maxSequenceLength; }
        public void setMaxSequenceLength(int maxSequenceLength) { this.maxSequenceLength = maxSequenceLength; }
        public boolean isWarmUp() { return warmUp; }
        public void setWarmUp(boolean warmUp) { this.warmUp = warmUp; }
        public boolean isRequestArena() { return requestArena; }
        public void setRequestArena(boolean requestArena) { this.requestArena = requestArena; }
    }

    /** {@code gpupool.models.*}: where the models come from. */
    public static class Models {

        /** Folder with one sub-folder per model (config.json + model.safetensors), relative to the working directory. */
        private Path path = Path.of("models");

        /**
         * Who decides which models are served: none (every folder at start-up, nothing changes after),
         * or explicit (also POST /v2/repository/models/{m}/load and /unload, open to every client of the
         * inference port, as Triton's --model-control-mode=explicit).
         */
        private ModelsSettings.Control control = ModelsSettings.Control.NONE;

        ModelsSettings toSettings() {
            return new ModelsSettings(path, control);
        }

        public Path getPath() { return path; }
        public void setPath(Path path) { this.path = path; }
        public ModelsSettings.Control getControl() { return control; }
        public void setControl(ModelsSettings.Control control) { this.control = control; }
    }
}
