package io.gpupool.backend.cuda;

import io.gpupool.backend.ComputeDevice;
import io.gpupool.backend.GraphCapture;
import io.gpupool.backend.KernelModule;
import io.gpupool.memory.metric.AllocatorMode;
import io.gpupool.memory.ChunkSource;
import io.gpupool.memory.DeviceAllocator;
import jcuda.driver.CUcontext;
import jcuda.driver.CUdevice;
import jcuda.driver.CUmodule;

import io.gpupool.backend.MatmulLibrary;

import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.Objects;
import java.util.Optional;

import static jcuda.driver.JCudaDriver.cuCtxSetCurrent;
import static jcuda.driver.JCudaDriver.cuDeviceGetName;
import static jcuda.driver.JCudaDriver.cuDevicePrimaryCtxRelease;
import static jcuda.driver.JCudaDriver.cuDevicePrimaryCtxRetain;
import static jcuda.driver.JCudaDriver.cuDeviceTotalMem;
import static jcuda.driver.JCudaDriver.cuMemGetInfo;
import static jcuda.driver.JCudaDriver.cuModuleLoadData;

/**
 * One CUDA device and its primary context. Every driver call in this package first makes the
 * context current on the calling thread ({@link #makeCurrent()}, a thread-local check, one driver
 * call only when the thread last used another context), so work can move between threads freely.
 */
public final class CudaDevice implements ComputeDevice {

    private static final ThreadLocal<CUcontext> CURRENT = new ThreadLocal<>();
    private static final System.Logger LOG = System.getLogger(CudaDevice.class.getName());
    /** cuBLASLt workspace per stream: NVIDIA's recommendation for Hopper, enough for every split-K algorithm. */
    static final long CUBLASLT_WORKSPACE_BYTES = 32L << 20;

    private final int index;
    private final CUdevice device;
    private final CUcontext context = new CUcontext();
    private final String name;
    private final long totalMemory;
    private final CudaBackend.Options options;
    private final CudaChunkSource plainSource;
    private final PinnedStagingPool staging;
    private ExpandableChunkSource expandableSource;
    /** Set by the first {@link #matmulLibrary} call: the library, or empty once it failed to load. */
    private Optional<CublasLtLibrary> matmul;
    private Path matmulFolder;

    CudaDevice(int index, CUdevice device, CudaBackend.Options options) {
        this.index = index;
        this.device = device;
        this.options = options;
        Cu.check("cuDevicePrimaryCtxRetain", cuDevicePrimaryCtxRetain(context, device), "device " + index);
        makeCurrent();
        byte[] nameBytes = new byte[256];
        Cu.check("cuDeviceGetName", cuDeviceGetName(nameBytes, nameBytes.length, device));
        int end = 0;
        while (end < nameBytes.length && nameBytes[end] != 0) {
            end++;
        }
        this.name = new String(nameBytes, 0, end, StandardCharsets.UTF_8);
        long[] total = new long[1];
        Cu.check("cuDeviceTotalMem", cuDeviceTotalMem(total, device));
        this.totalMemory = total[0];
        this.plainSource = new CudaChunkSource(this);
        this.staging = new PinnedStagingPool(this, options.stagingSlotBytes(), options.stagingSlotsPerChunk(),
                options.stagingMaxSlots());
    }

    /** "cuda:N", for messages and metric tags. */
    public String label() {
        return "cuda:" + index;
    }

    void makeCurrent() {
        if (CURRENT.get() != context) {
            Cu.check("cuCtxSetCurrent", cuCtxSetCurrent(context), label());
            CURRENT.set(context);
        }
    }

    /** How this device's streams launch kernels: through FFM where the options allow it and it binds, else JCuda. */
    KernelLauncher launcherFor(Cu.StreamHandle stream) {
        return options.ffmLaunches() ? KernelLauncher.forStream(stream) : new JCudaKernelLauncher(stream);
    }

    /** The JCuda device handle (for attribute queries). */
    CUdevice handle() {
        return device;
    }

    PinnedStagingPool staging() {
        return staging;
    }

    @Override
    public int index() {
        return index;
    }

    @Override
    public String name() {
        return name;
    }

    @Override
    public long totalMemory() {
        return totalMemory;
    }

    @Override
    public long freeMemory() {
        makeCurrent();
        long[] free = new long[1];
        long[] total = new long[1];
        Cu.check("cuMemGetInfo", cuMemGetInfo(free, total), label());
        return free[0];
    }

    /** The pool's chunk source: expandable segments when the backend options ask for them, else plain. */
    @Override
    public ChunkSource chunkSource() {
        return options.expandableSegments() ? expandableChunkSource() : plainSource;
    }

    /** cuMemAlloc/cuMemFree chunks, and reserved address space mapped granule by granule where the device supports it. */
    public CudaChunkSource plainChunkSource() {
        return plainSource;
    }

    /** The expandable-segments source, created (virtual range reserved) on first use. */
    public synchronized ExpandableChunkSource expandableChunkSource() {
        if (expandableSource == null) {
            long reserve = options.expandableReserveBytes() > 0 ? options.expandableReserveBytes() : totalMemory;
            expandableSource = new ExpandableChunkSource(this, LibCuda.get(), reserve);
        }
        return expandableSource;
    }

    /** Pinned staging memory currently held (bytes). */
    public long pinnedStagingBytes() {
        return staging.pinnedBytes();
    }

    /** DIRECT → cuMemAlloc/cuMemFree per block; CUDA_ASYNC → cuMemAllocAsync/cuMemFreeAsync; else empty. */
    @Override
    public Optional<DeviceAllocator> nativeAllocator(AllocatorMode mode) {
        return switch (mode) {
            case DIRECT -> Optional.of(new CudaDirectAllocator(this));
            case CUDA_ASYNC -> Optional.of(new CudaAsyncAllocator(this));
            default -> Optional.empty();
        };
    }

    /** The release threshold of this device's default memory pool (read through FFM). */
    public long defaultPoolReleaseThreshold() {
        makeCurrent();
        LibCuda lib = LibCuda.get();
        return lib.memPoolAttribute(lib.deviceDefaultMemPool(index), LibCuda.MEMPOOL_ATTR_RELEASE_THRESHOLD);
    }

    /**
     * cuBLASLt on this device (see {@link LibCublasLt} for where it is looked for), loaded and its handle created
     * on the first call; later calls return the same answer whatever folder they name. A library that cannot be
     * loaded gives one log line and empty.
     */
    @Override
    public synchronized Optional<MatmulLibrary> matmulLibrary(Path folder) {
        if (matmul == null) {
            matmulFolder = folder;
            LibCublasLt.Loaded loaded = LibCublasLt.load(folder, LibCublasLt.NAMES, LibCublasLt.TOOLKIT_FOLDERS);
            Optional<CublasLtLibrary> library = Optional.empty();
            if (loaded.library().isPresent()) {
                try {
                    library = Optional.of(new CublasLtLibrary(this, loaded.library().get(), CUBLASLT_WORKSPACE_BYTES));
                    LOG.log(System.Logger.Level.INFO, "{0}: GEMMs through {1} ({2})", label(),
                            library.get().description(), loaded.library().get().source);
                } catch (RuntimeException | LinkageError e) {
                    LOG.log(System.Logger.Level.WARNING, "{0}: cuBLASLt from {1} is unusable ({2}); GEMMs run on "
                            + "gpupool''s own kernels", label(), loaded.library().get().source, e.getMessage());
                }
            } else {
                LOG.log(System.Logger.Level.WARNING, "{0}: cuBLASLt not loaded ({1}); GEMMs run on gpupool''s own "
                        + "kernels", label(), loaded.failure());
            }
            matmul = library;
        } else if (!Objects.equals(folder, matmulFolder)) {
            LOG.log(System.Logger.Level.DEBUG, "{0}: cuBLASLt already chosen from {1}; folder {2} ignored", label(),
                    matmulFolder, folder);
        }
        return matmul.map(MatmulLibrary.class::cast);
    }

    @Override
    public CudaStream createStream(int ordinal) {
        if (ordinal < 0) {
            throw new IllegalArgumentException("stream ordinal must be >= 0, got " + ordinal);
        }
        return new CudaStream(this, ordinal);
    }

    /** Loads PTX text (a trailing NUL is added when missing) with cuModuleLoadData. */
    /** Stream capture into CUDA graphs, on a stream of its own with {@code streamOrdinal}. */
    @Override
    public Optional<GraphCapture> openGraphCapture(int streamOrdinal) {
        return Optional.of(new CudaGraphCapture(this, streamOrdinal));
    }

    @Override
    public KernelModule loadModule(String moduleName, byte[] image) {
        if (image == null || image.length == 0) {
            throw new IllegalArgumentException("module " + moduleName + ": empty image");
        }
        byte[] terminated = image[image.length - 1] == 0 ? image : Arrays.copyOf(image, image.length + 1);
        makeCurrent();
        CUmodule module = new CUmodule();
        Cu.check("cuModuleLoadData", cuModuleLoadData(module, terminated), "module " + moduleName + " on " + label());
        return new CudaModule(this, moduleName, module);
    }

    @Override
    public void bindToCurrentThread() {
        makeCurrent();
    }

    void close() {
        makeCurrent();
        synchronized (this) {
            if (matmul != null) {
                matmul.ifPresent(CublasLtLibrary::close);
            }
        }
        staging.close();
        synchronized (this) {
            if (expandableSource != null) {
                expandableSource.close();
            }
        }
        plainSource.releaseAll();
        CURRENT.remove();
        Cu.check("cuDevicePrimaryCtxRelease", cuDevicePrimaryCtxRelease(device), label());
    }

    @Override
    public String toString() {
        return label() + " (" + name + ", " + totalMemory + " bytes)";
    }
}
