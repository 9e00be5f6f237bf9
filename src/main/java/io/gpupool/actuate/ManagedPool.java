package io.gpupool.actuate;

import java.io.InputStream;
import java.util.List;
import java.util.Optional;
import java.util.function.LongSupplier;
import java.util.function.Supplier;

import io.gpupool.memory.PoolConfig;
import io.gpupool.memory.PoolTuning;
import io.gpupool.memory.metric.AdmissionMetrics;
import io.gpupool.memory.metric.PoolMetrics;
import org.jspecify.annotations.Nullable;

/**
 * One device's pool as operations sees it: what the {@code gpupool} endpoint, the meters, the health
 * contributors and the dashboard read, and the few things they may change.
 *
 * <p>The seam between {@code actuate} and {@code memory}: {@link DevicePoolAdapter} implements it over a
 * {@code memory.DevicePool} (and the trace decorator when there is one), {@link AllocatorAdapter} over
 * any other allocator (best-fit, direct, cuda-async: numbers only, nothing to tune); tests use a fake. Reads go to
 * {@link PoolMetrics}, whose getters never take the allocation lock, because scrapes, health probes
 * and the dashboard read while requests allocate.
 */
public interface ManagedPool {

    /** The device selector used in URLs and as the {@code device} tag, e.g. {@code cuda:0} or {@code host:0}. */
    String device();

    /** Memory of the device behind the pool, in bytes (a cap given as a fraction applies to this). */
    long capacityBytes();

    /** Read-only statistics of the pool. */
    PoolMetrics metrics();

    /**
     * The configuration in force; null for an allocator that is not a {@code DevicePool} (modes BEST_FIT,
     * DIRECT, CUDA_ASYNC), which has no pool configuration and cannot be tuned.
     */
    @Nullable PoolConfig configuration();

    /**
     * The cap on reserved bytes in force, resolved against {@link #capacityBytes()}; the device's
     * memory when there is no pool configuration (nothing but the device limits those allocators).
     */
    default long capBytes() {
        PoolConfig config = configuration();
        return config == null ? capacityBytes() : config.effectiveCapBytes(capacityBytes());
    }

    /**
     * Applies {@code tuning} to the running pool, validated as a whole.
     *
     * @return the configuration in force afterwards
     * @throws IllegalArgumentException naming the field, the value and the allowed range, or saying
     *         that the allocator has no pool to tune
     */
    PoolConfig tune(PoolTuning tuning);

    /**
     * Empties every local cache, coalesces, returns idle chunks; first, where the pool reports {@link #kernels()},
     * the kernels give the idle streams' workspaces back. @return bytes given back to the device
     */
    long trim();

    /** The kernels that compute on this pool's device; null where the caller did not say. */
    default @Nullable Kernels kernels() {
        return null;
    }

    /**
     * What computes on a device: {@code gemmEngine} multiplies the linear layers (e.g. "cuBLASLt 13.1.0" or
     * "gpupool kernels"), {@code activations} is the type activations are held in ("fp32" or "bf16"),
     * {@code workspaces} is the pool memory the kernels hold per stream between requests, and {@code gemmChoices}
     * says how each product shape measured at warm-up runs ({@code gpupool.kernels.gemm-tuning}; empty when off).
     */
    record Kernels(String gemmEngine, String activations, Workspaces workspaces, List<GemmChoice> gemmChoices) {

        public Kernels {
            gemmChoices = List.copyOf(gemmChoices);
        }

        /** Kernels without measured product shapes. */
        public Kernels(String gemmEngine, String activations, Workspaces workspaces) {
            this(gemmEngine, activations, workspaces, List.of());
        }
    }

    /**
     * One measured product shape: {@code shape} ("128x768->3072 BF16 BIAS_GELU"), the {@code engine} that runs it
     * (a library algorithm or gpupool's kernels), its {@code millis} per run (null where no candidate ran), and
     * {@code heuristicMillis}, that of the library's own first choice (null where the library offered none), out of
     * {@code candidates} measured.
     */
    record GemmChoice(String shape, String engine, @Nullable Double millis, @Nullable Double heuristicMillis,
                      int candidates) {
    }

    /**
     * The kernels' per-stream workspaces (cuBLASLt's; all 0 for kernels that need none): {@code bytes} of the pool's
     * allocated bytes held by {@code streams} streams now, {@code capturedBytes} of them pinned because a CUDA graph
     * captured their address, {@code bytesPerStream} one workspace, {@code releases} workspaces given back to the
     * pool since start (idle release and trims). The rest can go back: after a trim, {@code bytes} =
     * {@code capturedBytes} plus what streams running a request hold.
     */
    record Workspaces(long bytes, long capturedBytes, int streams, long bytesPerStream, long releases) {

        public static final Workspaces NONE = new Workspaces(0, 0, 0, 0, 0);
    }

    /** The memory admission in front of this pool (requests waiting for their planned peak); null where none. */
    default @Nullable AdmissionMetrics admission() {
        return null;
    }

    /**
     * {@code pool} reporting {@code kernels} (read anew on each call) and {@code admission}, and trimmed after
     * {@code releaseWorkspaces} gave the idle streams' workspaces back to it; everything else is {@code pool}'s.
     */
    static ManagedPool withKernels(ManagedPool pool, Supplier<Kernels> kernels, LongSupplier releaseWorkspaces,
                                   @Nullable AdmissionMetrics admission) {
        return new ManagedPool() {
            @Override public String device() { return pool.device(); }
            @Override public long capacityBytes() { return pool.capacityBytes(); }
            @Override public PoolMetrics metrics() { return pool.metrics(); }
            @Override public @Nullable PoolConfig configuration() { return pool.configuration(); }
            @Override public long capBytes() { return pool.capBytes(); }
            @Override public PoolConfig tune(PoolTuning tuning) { return pool.tune(tuning); }
            @Override public long trim() {
                releaseWorkspaces.getAsLong();
                return pool.trim();
            }
            @Override public List<ChunkLayout> layout() { return pool.layout(); }
            @Override public Optional<TraceControl> trace() { return pool.trace(); }
            @Override public Kernels kernels() { return kernels.get(); }
            @Override public @Nullable AdmissionMetrics admission() { return admission; }
        };
    }

    /** The block layout of every chunk, for the dashboard's buddy map. */
    List<ChunkLayout> layout();

    /** Allocation-trace recording, when the pool is wrapped by the trace decorator. */
    Optional<TraceControl> trace();

    /**
     * One chunk and its leaf blocks in address order (offsets from the chunk's base). {@code blocks} is
     * empty when the pool reports only chunk totals; {@code freeBytes} is then all there is.
     */
    record ChunkLayout(int chunk, long bytes, long freeBytes, boolean dedicated, List<Block> blocks) {
    }

    /**
     * A leaf block of the buddy tree. {@code state} is {@code free} (global free list), {@code allocated}
     * (handed out), {@code cached} (held by a stream's local cache) or {@code split} (a minimum block
     * carved into small objects).
     */
    record Block(long offset, long bytes, String state) {
    }

    /** Start/stop recording alloc/free events and write them as CSV. */
    interface TraceControl {
        boolean recording();

        /** Events held for download (recorded since the last start). */
        long events();

        /** Clears the held events and starts recording. */
        void start();

        /** Stops recording; the events stay available for download. */
        void stop();

        /**
         * The events since the last start as {@code Thread,Time,Action,Pointer,Size,Stream} CSV, rendered
         * as it is read; pointers are stand-ins for the addresses unless {@code rawAddresses}.
         */
        InputStream csv(boolean rawAddresses);
    }
}
